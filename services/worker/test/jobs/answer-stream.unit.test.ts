import { describe, expect, it } from '@jest/globals';
import { AnswerFrameKind, decryptAnswerFrame, generateReplyKey } from '@svc/chain';
import { streamAnswer, type DeltaFrame } from '../../src/jobs/answer-stream.js';
import type { GenerationEvent } from '../../src/model/model-backend.js';

const replyKey = generateReplyKey();

async function* paced(events: GenerationEvent[], gapMs: number): AsyncIterable<GenerationEvent> {
  for (const event of events) {
    if (gapMs > 0) await new Promise((resolve) => setTimeout(resolve, gapMs));
    yield event;
  }
}

function text(value: string): GenerationEvent {
  return { kind: 'text', text: value };
}

function open(delta: DeltaFrame): string {
  return decryptAnswerFrame(AnswerFrameKind.Delta, delta.frame, replyKey, delta);
}

describe('streamAnswer', () => {
  it('sends the first text at once and coalesces a burst behind it', async () => {
    const deltas: DeltaFrame[] = [];
    const tokens = Array.from({ length: 50 }, (_, index) => text(` t${index}`));
    const answer = await streamAnswer(paced(tokens, 0), {
      jobId: 7n,
      attempt: 2,
      replyKey,
      onDelta: (delta) => deltas.push(delta),
      coalesceMs: 10_000,
      maxDeltaChars: 10_000,
    });
    expect(deltas).toHaveLength(2);
    expect(open(deltas[0]!)).toBe(' t0');
    expect(deltas.map(open).join('')).toBe(answer.text);
    expect(deltas.map((delta) => [delta.seq, delta.attempt, delta.jobId])).toEqual([
      [1, 2, 7n],
      [2, 2, 7n],
    ]);
    expect(answer.deltas).toBe(2);
  });

  it('flushes held text once the size limit is reached, and on a timer for a slow model', async () => {
    const bySize: DeltaFrame[] = [];
    await streamAnswer(paced([text('a'), text('bbbb'), text('cccc'), text('d')], 0), {
      jobId: 1n,
      attempt: 1,
      replyKey,
      onDelta: (delta) => bySize.push(delta),
      coalesceMs: 10_000,
      maxDeltaChars: 8,
    });
    expect(bySize.map(open)).toEqual(['a', 'bbbbcccc', 'd']);

    const byTimer: DeltaFrame[] = [];
    const slow = async function* (): AsyncIterable<GenerationEvent> {
      yield text('first');
      yield text(' second');
      // Longer than coalesceMs: the held text must go out before the next token comes.
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(byTimer.map(open)).toEqual(['first', ' second']);
      yield text(' third');
    };
    await streamAnswer(slow(), {
      jobId: 1n,
      attempt: 1,
      replyKey,
      onDelta: (delta) => byTimer.push(delta),
      coalesceMs: 20,
      maxDeltaChars: 1_000,
    });
    expect(byTimer.map(open).join('')).toBe('first second third');
  });

  it('commits only the text after a restart, while what streamed stays streamed', async () => {
    const deltas: DeltaFrame[] = [];
    const answer = await streamAnswer(paced([text('old'), { kind: 'restart' }, text('new')], 0), {
      jobId: 1n,
      attempt: 1,
      replyKey,
      onDelta: (delta) => deltas.push(delta),
      coalesceMs: 0,
      maxDeltaChars: 1_000,
    });
    expect(answer.text).toBe('new');
    expect(deltas.map(open)).toEqual(['old', 'new']);
    expect(answer.commitMismatchedHash).toBe(false);
  });
});
