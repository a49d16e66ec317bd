import type { DeltaFrame } from './answer-stream.js';
import type { SignedFinalAnswer } from './final-answer-journal.js';

/** Where a job's frames go: the worker link to the orchestrator, or nowhere when none is configured. */
export interface AnswerChannel {
  sendDelta(delta: DeltaFrame): void;
  sendFinal(answer: SignedFinalAnswer): void;
  /** Tells the orchestrator early that a job failed (the chain's JobFailed is the authority). */
  sendError(jobId: bigint, attempt: number, reason: string): void;
}

/** A worker that streams to no one still serves jobs on chain (the committed answer is the record). */
export const silentAnswerChannel: AnswerChannel = {
  sendDelta: () => {},
  sendFinal: () => {},
  sendError: () => {},
};
