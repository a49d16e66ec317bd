import { ContractRevertError } from '@svc/chain';
import { AppError, isAppError } from '@svc/platform';
import { delegatePathErrorOf, type BeforeSigning } from '../../chain/service-chain.js';
import type { CallIdentity } from '../../events/lifecycle-events.js';
import type { ConfiguredModel } from '../model-catalogue.js';

/** A job on chain: the transaction that submitted it (its first attempt), and the fee in escrow. */
export interface SubmittedJob {
  readonly jobId: bigint;
  readonly fee: bigint;
  readonly hash: string;
  readonly blockNumber: number;
  readonly promptBlobHash: string | undefined;
  /**
   * Reply keys of earlier calls made with the same payment: a resent per-call payment is handed the job
   * that payment settled, whose prompt an earlier call sealed. Its first attempt's answer opens with one.
   */
  readonly otherReplyKeys?: readonly Uint8Array[];
}

/**
 * A job whose submission is signed and broadcast: its id and transaction are known (the caller is told them
 * from the first byte), it may not be mined yet (docs/protocol.md, Starting before inclusion).
 */
export interface AnnouncedJob {
  readonly jobId: bigint;
  /** The submitting transaction as first signed (a fee bump replaces it with the same job and blob). */
  readonly hash: string;
  /** The fee the job is charged when it lands: the model's fee the call was checked against. */
  readonly fee: bigint;
  /**
   * What the session's worker is handed to start before inclusion: the signed transaction without its
   * sidecar, and the blob with its KZG commitment and proof. Absent when the job is announced only once
   * mined (the worker then learns of it from the chain).
   */
  readonly handover?: PendingHandover;
  /**
   * Resolves once the job is on chain; rejects with `NotSubmitted` (refused or reverted: nothing landed,
   * `SubmissionReverted` for a revert) or `SubmissionUnknown` (it may still land).
   */
  readonly landed: Promise<SubmittedJob>;
  /** As on `SubmittedJob`, when known at broadcast. */
  readonly otherReplyKeys?: readonly Uint8Array[];
}

/** A signed submission as its worker is handed it before inclusion. */
export interface PendingHandover {
  readonly signedTransaction: Uint8Array;
  readonly blob: Uint8Array;
  /** The worker recomputes it from the blob: no proof is handed over (it may still be computing). */
  readonly kzgCommitment: Uint8Array;
}

/** The job announced at once for a submission already mined (no handover: the worker reads the chain). */
export function announcedOnceMined(job: SubmittedJob): AnnouncedJob {
  return {
    jobId: job.jobId,
    hash: job.hash,
    fee: job.fee,
    landed: Promise.resolve(job),
    ...(job.otherReplyKeys ? { otherReplyKeys: job.otherReplyKeys } : {}),
  };
}

/** A submission's result: the job, or 'session_unusable' when the session cannot take one (try another). */
export type Submission = AnnouncedJob | 'session_unusable';

/**
 * One way a completion is paid (docs/architecture.md, A call's life): what it checks before submitting,
 * how it submits the job, and what a fault means for the payment. Chosen once, where the gRPC request is
 * read (`PaymentPaths`); the rest of the run never asks which path it is on.
 */
export interface PaymentPath {
  /** What every lifecycle event of the call repeats: who pays, for which key, under which reservation. */
  readonly identity: CallIdentity;
  /** Whose sessions the job runs in. */
  readonly sessionOwner: string;
  /** Refuses (throws an AppError) a call this path cannot pay, before anything is spent. */
  checkPayable(model: ConfiguredModel): Promise<void>;
  /**
   * Submits the job in the session, resolving once it is broadcast (or mined, on a path that cannot tell
   * earlier). Throws `NotSubmitted` for a refusal (nothing landed) and `SubmissionUnknown` when the job may
   * have landed unheard; after the broadcast, `landed` says the same. A path that signs the submission
   * itself calls `beforeSigning` with the job's id first, and sends nothing if it fails.
   */
  submit(
    sessionId: bigint,
    promptWire: Uint8Array,
    replyKey: Uint8Array,
    beforeSigning?: BeforeSigning,
  ): Promise<Submission>;
  /** Whether a run failing unexpectedly now may have left a job on chain (the payment must then stay held). */
  mayHaveSubmitted(): boolean;
  /** The `tx_hash` an answer names after a reassignment: the reassignment, or what took the payment. */
  answerTxHash(submission: string, reassignment: string): string;
  /** Told once the caller was given the answer (a per-call payment sent again is then refused as used). */
  answered?(): Promise<void>;
}

/** Ends a run before anything was submitted: the payment is free again. */
export class NotSubmitted extends Error {
  constructor(readonly error: AppError) {
    super(error.message);
  }
}

/**
 * Ends a run whose submission was mined and reverted (its session closed or changed under it, as a
 * front-run does): no job landed, so the payment is free again, and the session is dropped from the pool.
 */
export class SubmissionReverted extends NotSubmitted {}

/** Ends a run whose submission's outcome cannot be known (the settler was not heard): the job may exist. */
export class SubmissionUnknown extends Error {
  constructor(readonly error: AppError) {
    super(error.message);
  }
}

/** Runs a pre-submission step; its AppError (or a refused write) ends the call as not submitted. */
export async function refuseUnless<T>(step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (error) {
    if (isAppError(error)) throw new NotSubmitted(error);
    if (error instanceof ContractRevertError)
      throw new NotSubmitted(delegatePathErrorOf(error) ?? new AppError('job_failed', { cause: error }));
    throw error;
  }
}
