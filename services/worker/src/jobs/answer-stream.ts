import { AnswerFrameKind, encryptAnswerFrame } from '@svc/chain';
import type { GenerationEvent } from '../model/model-backend.js';

/** One encrypted delta, ready for the worker link. */
export interface DeltaFrame {
  readonly jobId: bigint;
  readonly attempt: number;
  readonly seq: number;
  readonly frame: Uint8Array;
}

export interface StreamedAnswer {
  /** The answer to commit: the text after the model's last restart. */
  readonly text: string;
  /** Deltas sent; the final frame's seq. */
  readonly deltas: number;
  /** The model asked (test fault) for a commitment that does not match the final answer. */
  readonly commitMismatchedHash: boolean;
}

export interface AnswerStreamOptions {
  readonly jobId: bigint;
  readonly attempt: number;
  readonly replyKey: Uint8Array;
  /** Called for each delta frame, in seq order. */
  readonly onDelta: (delta: DeltaFrame) => void;
  /** Text is held at most this long before it goes out as a delta (the first text goes at once). */
  readonly coalesceMs: number;
  /** A delta goes out as soon as this much text is held. */
  readonly maxDeltaChars: number;
}

/**
 * Turns a model's events into encrypted deltas (seq from 1), coalescing small pieces so a fast
 * model does not cost one frame per token, and works out the answer to commit.
 */
export async function streamAnswer(
  events: AsyncIterable<GenerationEvent>,
  options: AnswerStreamOptions,
): Promise<StreamedAnswer> {
  let committed = '';
  let pending = '';
  let deltas = 0;
  let lastSentAt = Number.NEGATIVE_INFINITY;
  let commitMismatchedHash = false;
  let timer: NodeJS.Timeout | undefined;

  const flush = (): void => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (pending === '') return;
    deltas += 1;
    const frame = encryptAnswerFrame(AnswerFrameKind.Delta, pending, options.replyKey, {
      jobId: options.jobId,
      attempt: options.attempt,
      seq: deltas,
    });
    pending = '';
    lastSentAt = Date.now();
    options.onDelta({ jobId: options.jobId, attempt: options.attempt, seq: deltas, frame });
  };

  try {
    for await (const event of events) {
      if (event.kind === 'commit-mismatched-hash') {
        commitMismatchedHash = true;
      } else if (event.kind === 'restart') {
        // What already went out stays out; only the commitment starts over.
        flush();
        committed = '';
      } else if (event.text !== '') {
        pending += event.text;
        committed += event.text;
        if (pending.length >= options.maxDeltaChars || Date.now() - lastSentAt >= options.coalesceMs) flush();
        else timer ??= setTimeout(flush, options.coalesceMs - (Date.now() - lastSentAt));
      }
    }
    flush();
  } finally {
    if (timer) clearTimeout(timer);
  }
  return { text: committed, deltas, commitMismatchedHash };
}
