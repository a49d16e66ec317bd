import { setTimeout as sleep } from 'node:timers/promises';
import { fromBinary } from '@bufbuild/protobuf';
import {
  AnswerFrameKind,
  JobState,
  decryptAnswerFrame,
  recoverFinalAnswerSigner,
  responseHashOf,
  type Commitment,
  type Job,
} from '@svc/chain';
import { hexlify } from 'ethers';
import type { FrameCursor, FrameStreams, Logger } from '@svc/platform';
import {
  ConnectRequestSchema,
  JobErrorReason,
  type FinalAnswer,
} from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import { jobFrameStreamKey } from '../link/answer-frame-intake.js';

/** One attempt of a job, as the relay follows it. */
export interface AttemptToRelay {
  readonly jobId: bigint;
  readonly attempt: number;
  readonly replyKey: Uint8Array;
  /** Keys the attempt's prompt may have been sealed with instead (a resent payment's job: an earlier call's). */
  readonly otherReplyKeys?: readonly Uint8Array[];
  /**
   * Set to end the attempt on the worker's signed final (docs/protocol.md, Ending on the signed final):
   * a final whose EIP-712 signature recovers to `worker` for this job, attempt and session, and that
   * decrypts, ends `follow` at once as `signed`, without waiting for `completeJob` to be mined.
   */
  readonly signedBy?: {
    readonly worker: string;
    readonly sessionId: bigint;
    readonly chainId: bigint;
    readonly jobRegistry: string;
  };
  /**
   * Set for an attempt handed to its worker before its submission was mined (docs/protocol.md, Starting
   * before inclusion): until the chain holds the job, its absence is the submission still on its way.
   */
  readonly landing?: SubmissionLanding;
  /**
   * The worker's signed final, already in hand (the second `follow`, after `signed`): the commitment is
   * checked against it, so its frame need not be read again from the store, which may have lost it (a
   * Redis restart), and no later frame replaces it.
   */
  readonly signedFinal?: FinalAnswer;
}

/** Whether a submission handed over before inclusion has failed to land (reverted, refused, or unknown). */
export interface SubmissionLanding {
  readonly failed: boolean;
}

/** How an attempt ended. */
export type AttemptOutcome =
  /** `JobCompleted` committed the final this relay holds, whose text it decrypted. */
  | { readonly kind: 'committed'; readonly text: string; readonly job: Job }
  /** The committed hash is not the hash of the worker's signed final: dispute it. */
  | {
      readonly kind: 'mismatch';
      readonly final: FinalAnswer;
      readonly job: Job;
      readonly commitment: Commitment;
    }
  /**
   * Committed, but no final reached the service in time, or the committed final does not decrypt:
   * nothing to deliver or dispute (the job is refunded as undelivered).
   */
  | { readonly kind: 'undelivered'; readonly reason: string; readonly job: Job }
  /**
   * The worker's signed final arrived (only when `signedBy` was given): its text, before any commitment.
   * Whether the chain's commitment is that final is for a second `follow` to say.
   */
  | { readonly kind: 'signed'; readonly text: string; readonly final: FinalAnswer }
  /** The worker failed the job, it missed its deadline, or it moved on without this relay. */
  | { readonly kind: 'failed'; readonly reason: string; readonly job: Job }
  /**
   * The job is not on chain and will not be answered: its submission failed to land, or its worker gave it
   * up unmined (`NOT_MINED`). Only with `landing`; the submission may still land (the run's to follow).
   */
  | { readonly kind: 'unlanded'; readonly reason: string };

export interface AnswerRelayOptions {
  readonly frames: FrameStreams;
  readonly readJob: (jobId: bigint) => Promise<Job>;
  /** What a completed job's worker committed; undefined until the node has its `JobCompleted`. */
  readonly readCommitment: (job: Job) => Promise<Commitment | undefined>;
  readonly chainNow: () => Promise<number>;
  /** How often the chain is read while frames flow (and the longest a frame read blocks). */
  readonly pollIntervalMs: number;
  /** How long a committed job waits for its final frame before it counts as undelivered. */
  readonly finalGraceMs: number;
  /** How long a job's frames stay in the store once its call is over. */
  readonly frameStreamTtlMs: number;
  readonly logger: Logger;
}

/**
 * Follows one attempt of a job: decrypts the worker's deltas from the job's frame stream in order (from
 * the start, whichever replica took them), and ends when the chain says how the attempt ended. Deltas
 * after a gap in `seq` are not passed on: the final answer carries the whole text anyway.
 */
export class AnswerRelay {
  constructor(private readonly options: AnswerRelayOptions) {}

  /** Lets the job's frame stream lapse: its call is over (a worker re-sending its final appends nothing new). */
  async retire(jobId: bigint): Promise<void> {
    await this.options.frames.expire(jobFrameStreamKey(jobId), this.options.frameStreamTtlMs);
  }

  async follow(attempt: AttemptToRelay, onDelta: (text: string) => void): Promise<AttemptOutcome> {
    const { frames, readJob, readCommitment, chainNow, pollIntervalMs, finalGraceMs, logger } = this.options;
    const streamKey = jobFrameStreamKey(attempt.jobId);
    const position = { jobId: attempt.jobId, attempt: attempt.attempt };
    let cursor: FrameCursor | null = null;
    let nextSeq = 1;
    let gap = false;
    let final: FinalAnswer | undefined = attempt.signedFinal;
    let workerError: JobErrorReason | undefined;
    let completedSeenAt: number | undefined;
    let lastChainRead = 0;
    // The first key that opens a frame is the attempt's: tried first from then on.
    const keys = [attempt.replyKey, ...(attempt.otherReplyKeys ?? [])];
    const open = (kind: AnswerFrameKind, sealed: Uint8Array, seq: number): string => {
      for (let index = 0; ; index++) {
        try {
          const text = decryptAnswerFrame(kind, sealed, keys[index]!, { ...position, seq });
          if (index > 0) keys.unshift(...keys.splice(index, 1));
          return text;
        } catch (error) {
          if (index >= keys.length - 1) throw error;
        }
      }
    };
    for (;;) {
      const batch = await frames.read(streamKey, cursor, { blockMs: final ? 0 : pollIntervalMs, count: 256 });
      for (const frame of batch) {
        cursor = frame.cursor;
        const request = fromBinary(ConnectRequestSchema, frame.payload).frame;
        if (request.case !== 'chunk' && request.case !== 'finalAnswer' && request.case !== 'jobError')
          continue;
        if (request.value.attempt !== attempt.attempt) continue;
        if (request.case === 'chunk') {
          const { seq } = request.value;
          if (seq < nextSeq) continue;
          if (seq > nextSeq || gap) {
            gap = true;
            continue;
          }
          try {
            onDelta(open(AnswerFrameKind.Delta, request.value.sealedDelta, seq));
            nextSeq += 1;
          } catch (error) {
            // A delta that does not open is the worker's fault; the committed final decides the answer.
            logger.warn({ err: error, jobId: attempt.jobId.toString(), seq }, 'answer delta did not decrypt');
            gap = true;
          }
        } else if (request.case === 'finalAnswer') {
          if (attempt.signedFinal) continue;
          final = request.value;
          const signed = attempt.signedBy ? this.#signedText(attempt, final, open) : undefined;
          if (signed !== undefined) return { kind: 'signed', text: signed, final };
        } else {
          workerError = request.value.reason;
        }
      }
      const now = Date.now();
      if (!final && !workerError && now - lastChainRead < pollIntervalMs) continue;
      lastChainRead = now;
      const job = await readJob(attempt.jobId);
      if (job.attempt === 0 && attempt.landing) {
        if (attempt.landing.failed) return { kind: 'unlanded', reason: 'its submission did not land' };
        if (workerError === JobErrorReason.NOT_MINED)
          return { kind: 'unlanded', reason: 'its submission was not mined in time' };
        // Still on its way: deltas flow meanwhile; the chain is looked at again after a poll interval.
        if (final || workerError !== undefined) await sleep(pollIntervalMs);
        continue;
      }
      if (job.attempt !== attempt.attempt)
        return { kind: 'failed', reason: 'the job moved to another attempt', job };
      switch (job.state) {
        case JobState.Completed:
        case JobState.Released:
          if (final) {
            const commitment = await readCommitment(job);
            // Completed, but its event not yet on this node: looked for again after a poll interval.
            if (!commitment) break;
            if (responseHashOf(final.sealedAnswer) !== commitment.responseHash)
              return { kind: 'mismatch', final, job, commitment };
            let text: string;
            try {
              text = open(AnswerFrameKind.Final, final.sealedAnswer, final.seq);
            } catch (error) {
              // The worker committed a frame nobody can read: as good as no answer.
              logger.warn({ err: error, jobId: attempt.jobId.toString() }, 'committed final did not decrypt');
              return { kind: 'undelivered', reason: 'the committed final answer does not decrypt', job };
            }
            return { kind: 'committed', text, job };
          }
          completedSeenAt ??= now;
          if (now - completedSeenAt >= finalGraceMs)
            return {
              kind: 'undelivered',
              reason: 'the worker committed an answer but never delivered it',
              job,
            };
          break;
        case JobState.Failed:
          return {
            kind: 'failed',
            reason: workerError ? JobErrorReason[workerError] : 'the worker failed the job',
            job,
          };
        case JobState.Submitted:
          if ((await chainNow()) > job.deadline)
            return { kind: 'failed', reason: 'the job missed its deadline', job };
          break;
        default:
          return { kind: 'failed', reason: `the job is in state ${job.state}`, job };
      }
      // A final in hand, the chain decides: a caller still waiting for its answer has it looked for every
      // 50 ms; the check of a final its caller was given already (`signedFinal`) waits a poll interval,
      // since each look is two chain reads and a commitment may be blocks away.
      if (final && !batch.length)
        await sleep(attempt.signedFinal ? pollIntervalMs : Math.min(pollIntervalMs, 50));
    }
  }

  /**
   * The text of a final the session's worker signed for this attempt, or undefined when the signature
   * is not its own or the final does not decrypt: then the commitment on chain decides, as before.
   */
  #signedText(
    attempt: AttemptToRelay,
    final: FinalAnswer,
    open: (kind: AnswerFrameKind, sealed: Uint8Array, seq: number) => string,
  ): string | undefined {
    const signedBy = attempt.signedBy!;
    try {
      const signer = recoverFinalAnswerSigner(
        {
          chainId: signedBy.chainId,
          jobRegistry: signedBy.jobRegistry,
          jobId: attempt.jobId,
          attempt: attempt.attempt,
          sessionId: signedBy.sessionId,
        },
        final.sealedAnswer,
        hexlify(final.workerSignature),
      );
      if (signer.toLowerCase() !== signedBy.worker.toLowerCase()) return undefined;
      return open(AnswerFrameKind.Final, final.sealedAnswer, final.seq);
    } catch (error) {
      this.options.logger.warn(
        { err: error, jobId: attempt.jobId.toString() },
        'signed final not usable before its commitment',
      );
      return undefined;
    }
  }
}
