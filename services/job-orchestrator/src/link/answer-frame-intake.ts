import { create, toBinary } from '@bufbuild/protobuf';
import type { FrameStreams } from '@svc/platform';
import {
  ConnectRequestSchema,
  FrameRejectionReason,
  type AnswerChunk,
  type FinalAnswer,
  type JobError,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import type { JobAttempts } from './job-attempts.js';

/** A worker frame about a job attempt. */
export type AnswerFrame =
  | { readonly case: 'chunk'; readonly value: AnswerChunk }
  | { readonly case: 'finalAnswer'; readonly value: FinalAnswer }
  | { readonly case: 'jobError'; readonly value: JobError };

export type IntakeVerdict =
  | { readonly accepted: true; readonly jobId: bigint; readonly attempt: number; readonly duplicate: boolean }
  | { readonly accepted: false; readonly reason: FrameRejectionReason };

/** The store stream holding every accepted frame of a job, read by whichever replica serves the call. */
export function jobFrameStreamKey(jobId: bigint): string {
  return `job-frames:${jobId}`;
}

/**
 * The dedup id of a frame within its job's stream: (attempt, seq) for a chunk. A final carries the seq
 * of the last chunk before it, and an error none, so they get their own slot in the attempt.
 */
export function frameDedupId(frame: AnswerFrame): string {
  const { attempt } = frame.value;
  if (frame.case === 'chunk') return `${attempt}:${frame.value.seq}`;
  return `${attempt}:${frame.case === 'finalAnswer' ? 'final' : 'error'}`;
}

/**
 * Accepts a worker's answer frames only from the job's current worker and attempt on chain, and appends
 * each accepted frame (the worker's `ConnectRequest`, as sent) to the job's stream exactly once.
 */
export class AnswerFrameIntake {
  readonly #attempts: JobAttempts;
  readonly #frames: FrameStreams;

  constructor(attempts: JobAttempts, frames: FrameStreams) {
    this.#attempts = attempts;
    this.#frames = frames;
  }

  async accept(worker: string, frame: AnswerFrame): Promise<IntakeVerdict> {
    const jobId = parseJobId(frame.value.jobId);
    if (jobId === undefined || isMalformed(frame)) return rejected(FrameRejectionReason.MALFORMED);
    const current = await this.#attempts.attemptFor(jobId, worker, frame.value.attempt);
    if (!current) return rejected(FrameRejectionReason.UNKNOWN_JOB);
    if (current.worker.toLowerCase() !== worker.toLowerCase())
      return rejected(FrameRejectionReason.NOT_CURRENT_WORKER);
    if (current.attempt !== frame.value.attempt) return rejected(FrameRejectionReason.STALE_ATTEMPT);
    const payload = toBinary(ConnectRequestSchema, create(ConnectRequestSchema, { frame }));
    const { appended } = await this.#frames.append(jobFrameStreamKey(jobId), frameDedupId(frame), payload);
    return { accepted: true, jobId, attempt: current.attempt, duplicate: !appended };
  }
}

function rejected(reason: FrameRejectionReason): IntakeVerdict {
  return { accepted: false, reason };
}

function parseJobId(text: string): bigint | undefined {
  if (!/^[0-9]{1,78}$/.test(text)) return undefined;
  const id = BigInt(text);
  return id < 2n ** 256n ? id : undefined;
}

function isMalformed(frame: AnswerFrame): boolean {
  if (frame.value.attempt === 0) return true;
  switch (frame.case) {
    case 'chunk':
      return frame.value.seq === 0 || frame.value.sealedDelta.length === 0;
    case 'finalAnswer':
      return frame.value.sealedAnswer.length === 0 || frame.value.workerSignature.length !== 65;
    case 'jobError':
      return false;
  }
}
