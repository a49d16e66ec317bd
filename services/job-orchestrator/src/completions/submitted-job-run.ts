import { JobState } from '@svc/chain';
import { AppError, type Logger } from '@svc/platform';
import { promptBlobHashOf, type ServiceChain } from '../chain/service-chain.js';
import { JobLifecycleKind, type LifecyclePublisher } from '../events/lifecycle-events.js';
import type { TrackedJobs } from '../keeper/tracked-jobs.js';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import type { SessionLease } from '../sessions/session-pool.js';
import type { AnswerRelay, AttemptOutcome, AttemptToRelay } from './answer-relay.js';
import type { CallStream } from './call-stream.js';
import type { ServiceDescription } from './completion-call.js';
import type { PaymentPath, SubmittedJob } from './payment-paths/payment-path.js';
import type { PreparedPrompt } from './prompt-envelope.js';

/** The transaction that started an attempt (submission, settlement or reassignment). */
interface AttemptTransaction {
  readonly hash: string;
  readonly blockNumber: number;
  readonly promptBlobHash: string | undefined;
}

/** A new attempt of the job: its session, its prompt sealed to that session, and its transaction. */
export interface Reassignment {
  readonly lease: SessionLease;
  readonly prompt: PreparedPrompt;
  readonly tx: AttemptTransaction;
}

export interface SubmittedJobRunOptions {
  readonly chain: Pick<
    ServiceChain,
    | 'reads'
    | 'jobRegistry'
    | 'timeoutJob'
    | 'reassignJob'
    | 'disputeMismatch'
    | 'refundJob'
    | 'refundUndelivered'
  >;
  /** With `chain.jobRegistry`, the EIP-712 domain a worker's signed final is checked in. */
  readonly chainId: bigint;
  readonly jobs: Pick<TrackedJobs, 'track' | 'holdRun' | 'forget' | 'markUndelivered'>;
  readonly lifecycle: Pick<LifecyclePublisher, 'publish'>;
  readonly relay: Pick<AnswerRelay, 'follow' | 'retire'>;
  readonly workers: Pick<LinkedWorkers, 'sendHint' | 'acknowledgeFinal'>;
  /** How long a job's `running` mark outlives the call holding it (renewed while the call lives). */
  readonly runMarkTtlMs: number;
  readonly logger: Logger;
}

/** What the run of one call lends the run of its job. */
export interface SubmittedJobCall {
  readonly payment: PaymentPath;
  readonly stream: CallStream;
  readonly signal: AbortSignal;
  /** Who holds the job's `running` mark (the call's id). */
  readonly holder: string;
  /** A session for the next attempt (not one that failed, not with the worker that just failed) and the prompt sealed to it. */
  prepareAttempt(
    failedSessions: ReadonlySet<bigint>,
    failedWorker: string,
  ): Promise<{ lease: SessionLease; prompt: PreparedPrompt; wire: Uint8Array }>;
}

/**
 * Runs a submitted job to its end: relays each attempt's answer, verifies it against the commitment on
 * chain and delivers it; disputes a worker whose commitment is not what it signed; reassigns a job that
 * failed before anything reached the caller once, to a new session (no second payment); and refunds a job
 * that failed for good. Every step is a lifecycle event.
 */
export class SubmittedJobRun {
  constructor(
    private readonly options: SubmittedJobRunOptions,
    private readonly call: SubmittedJobCall,
  ) {}

  async serve(firstLease: SessionLease, submitted: SubmittedJob, firstPrompt: PreparedPrompt): Promise<void> {
    const { jobId, fee } = submitted;
    const { chain, jobs, lifecycle, relay, logger } = this.options;
    const { payment, stream } = this.call;
    let attemptTx: AttemptTransaction = submitted;
    let lease = firstLease;
    let prompt = firstPrompt;
    let attempt = 1;
    let service: ServiceDescription = {
      jobId,
      sessionId: lease.session.sessionId,
      txHash: attemptTx.hash,
      worker: lease.session.worker,
      droppedMessages: prompt.droppedMessages,
    };
    const failedSessions = new Set<bigint>();
    let run: Awaited<ReturnType<typeof jobs.holdRun>> | undefined;
    try {
      await jobs.track(jobId, payment.identity);
      run = await jobs.holdRun(jobId, this.call.holder, this.options.runMarkTtlMs);
      await lifecycle.publish(payment.identity, JobLifecycleKind.SUBMITTED, {
        jobId,
        sessionId: service.sessionId,
        attempt,
        txHash: attemptTx.hash,
        worker: service.worker,
        feeWei: fee,
        droppedMessages: prompt.droppedMessages,
      });
      for (;;) {
        this.#hintJob(service, attempt, attemptTx);
        const otherReplyKeys = attempt === 1 ? submitted.otherReplyKeys : undefined;
        const toRelay = {
          jobId,
          attempt,
          replyKey: prompt.replyKey,
          ...(otherReplyKeys ? { otherReplyKeys } : {}),
        };
        const outcome = await relay.follow(
          {
            ...toRelay,
            signedBy: {
              worker: service.worker,
              sessionId: service.sessionId,
              chainId: this.options.chainId,
              jobRegistry: chain.jobRegistry,
            },
          },
          (text) => stream.delta(service, fee, text),
        );
        if (outcome.kind === 'signed') {
          await this.#settleSigned(toRelay, outcome.text, lease, service, fee);
          return;
        }
        if (outcome.kind === 'committed') {
          // The worker answered: its record counts it (WorkerReputation, the pool's choice of workers).
          await lease.release('answered');
          await this.#acknowledgeFinal(jobId, attempt);
          await lifecycle.publish(payment.identity, JobLifecycleKind.COMPLETED, {
            jobId,
            attempt,
            worker: service.worker,
            sessionId: service.sessionId,
          });
          // A stream that diverged from the committed answer delivered nothing usable: refunded.
          if (!stream.deliver(outcome.text, service, fee, attempt)) await this.#refundUndelivered(jobId, fee);
          else
            await payment
              .answered?.()
              .catch((error: unknown) => logger.warn({ err: error }, 'answer not marked'));
          return;
        }
        if (outcome.kind === 'mismatch') {
          await lease.discard('failed');
          await this.#dispute(jobId, attempt, outcome, service);
          return;
        }
        if (outcome.kind === 'undelivered') {
          await lease.release('failed');
          stream.failCommitted(new AppError('job_failed', { message: `The job failed: ${outcome.reason}.` }));
          await this.#refundUndelivered(jobId, fee);
          return;
        }
        // The attempt failed. Retry once in a new session, only if nothing reached the client yet.
        await lease.discard('failed');
        failedSessions.add(service.sessionId);
        logger.info({ jobId: jobId.toString(), attempt, reason: outcome.reason }, 'job attempt failed');
        const failedJob = await this.#ensureFailed(jobId, outcome);
        const { maxAttempts } = await chain.reads.parameters();
        const canRetry =
          !stream.started &&
          failedJob.state === JobState.Failed &&
          attempt < maxAttempts &&
          !this.call.signal.aborted;
        const retried = canRetry
          ? await this.#reassign(jobId, attempt, failedSessions, service.worker, outcome.reason)
          : undefined;
        if (!retried) {
          stream.fail(new AppError('job_failed', { message: `The job failed: ${outcome.reason}.` }), service);
          if (failedJob.state === JobState.Failed) await this.#refund(jobId, failedJob.fee);
          return;
        }
        ({ lease, prompt } = retried);
        attempt += 1;
        service = {
          ...service,
          sessionId: lease.session.sessionId,
          worker: lease.session.worker,
          txHash: payment.answerTxHash(service.txHash, retried.tx.hash),
          droppedMessages: prompt.droppedMessages,
        };
        attemptTx = retried.tx;
      }
    } finally {
      // Whatever ended the run (a thrown chain or store error too), its session's lock goes: a no-op when
      // the path that ended it released or discarded the lease already.
      await lease.release();
      await run?.end();
      await relay.retire(jobId);
    }
  }

  /**
   * The fast path's end (docs/protocol.md, Ending on the signed final): the caller gets the signed final
   * at once ([DONE], or `stream_diverged` when it does not extend what was streamed), then the commitment
   * is checked. The same final committed: ANSWERED (or DIVERGED and the undelivered refund) as on the slow
   * path. Another hash committed: disputed, the worker slashed and the payer refunded. Never committed
   * (failed or timed out): the job is failed and refunded, so the worker, who did the work and did not
   * commit it, bears the loss; the payer is charged only for a committed job.
   */
  async #settleSigned(
    toRelay: Omit<AttemptToRelay, 'signedBy'>,
    text: string,
    lease: SessionLease,
    service: ServiceDescription,
    fee: bigint,
  ): Promise<void> {
    const { relay, lifecycle, logger } = this.options;
    const { payment, stream } = this.call;
    const { jobId, attempt } = toRelay;
    // Marked before the caller can see its answer: a resent payment is refused as used from then on.
    if (stream.extendsSent(text))
      await payment.answered?.().catch((error: unknown) => logger.warn({ err: error }, 'answer not marked'));
    const delivered = stream.deliver(text, service, fee, attempt, true);
    // The session takes the caller's next call at once: its worker answered (a commitment that turns
    // out otherwise is disputed and slashed, which is what keeps it honest, not this session's idleness).
    await lease.release('answered');
    const settled = await relay.follow(toRelay, () => undefined);
    switch (settled.kind) {
      case 'committed':
        await this.#acknowledgeFinal(jobId, attempt);
        await lifecycle.publish(payment.identity, JobLifecycleKind.COMPLETED, {
          jobId,
          attempt,
          worker: service.worker,
          sessionId: service.sessionId,
        });
        stream.recordDeferred();
        if (!delivered) await this.#refundUndelivered(jobId, fee);
        return;
      case 'mismatch':
        stream.dropDeferred();
        await this.#dispute(jobId, attempt, settled, service, true);
        return;
      case 'undelivered':
        stream.dropDeferred();
        await this.#refundUndelivered(jobId, fee);
        return;
      case 'failed':
      case 'signed': {
        stream.dropDeferred();
        logger.warn(
          { jobId: jobId.toString(), attempt, worker: service.worker },
          'the worker signed a final and never committed it: failing and refunding the job',
        );
        if (settled.kind === 'signed') return;
        const failedJob = await this.#ensureFailed(jobId, settled);
        if (failedJob.state === JobState.Failed) await this.#refund(jobId, failedJob.fee);
        return;
      }
    }
  }

  /**
   * Tells the worker its final is committed (it stops re-sending it). Never throws: a chain read or a link
   * that fails here must not keep the answer from its caller, nor ANSWERED (which counts the fee as spent)
   * from the outbox.
   */
  async #acknowledgeFinal(jobId: bigint, attempt: number): Promise<void> {
    try {
      await this.options.workers.acknowledgeFinal(jobId, attempt, true);
    } catch (error) {
      this.options.logger.warn({ err: error, jobId: jobId.toString(), attempt }, 'final not acknowledged');
    }
  }

  /** Makes sure a failed attempt is Failed on chain: a job past its deadline is timed out. */
  async #ensureFailed(jobId: bigint, outcome: Extract<AttemptOutcome, { kind: 'failed' }>) {
    const { chain, logger } = this.options;
    if (outcome.job.state !== JobState.Submitted) return outcome.job;
    try {
      await chain.timeoutJob(jobId);
    } catch (error) {
      // The worker's own failJob may have landed first; the state read below says.
      logger.info({ err: error, jobId: jobId.toString() }, 'timeoutJob not sent');
    }
    return chain.reads.getJob(jobId);
  }

  async #reassign(
    jobId: bigint,
    failedAttempt: number,
    failedSessions: ReadonlySet<bigint>,
    failedWorker: string,
    reason: string,
  ): Promise<Reassignment | undefined> {
    const { chain, lifecycle, logger } = this.options;
    this.call.stream.retrying(jobId, failedAttempt);
    let lease: SessionLease | undefined;
    try {
      const next = await this.call.prepareAttempt(failedSessions, failedWorker);
      lease = next.lease;
      const reassigned = await chain.reassignJob(jobId, lease.session.sessionId, next.wire);
      const tx = {
        hash: reassigned.hash,
        blockNumber: reassigned.blockNumber,
        promptBlobHash: promptBlobHashOf(reassigned),
      };
      await lifecycle.publish(this.call.payment.identity, JobLifecycleKind.REASSIGNED, {
        jobId,
        sessionId: lease.session.sessionId,
        attempt: failedAttempt + 1,
        txHash: tx.hash,
        worker: lease.session.worker,
      });
      return { lease, prompt: next.prompt, tx };
    } catch (error) {
      await lease?.release();
      logger.warn({ err: error, jobId: jobId.toString(), reason }, 'failed job not reassigned');
      return undefined;
    }
  }

  async #dispute(
    jobId: bigint,
    attempt: number,
    outcome: Extract<AttemptOutcome, { kind: 'mismatch' }>,
    service: ServiceDescription,
    afterDelivery = false,
  ): Promise<void> {
    const { chain, lifecycle, jobs, logger } = this.options;
    const { identity } = this.call.payment;
    logger.warn(
      { jobId: jobId.toString(), attempt, worker: service.worker },
      'committed hash differs from the signed final: disputing',
    );
    // After a fast-path delivery the caller has its answer already: nothing more is said to it.
    if (!afterDelivery)
      this.call.stream.fail(
        new AppError('job_failed', {
          message: "The worker's committed answer does not match the answer it delivered.",
        }),
        service,
      );
    try {
      const dispute = await chain.disputeMismatch(
        jobId,
        attempt,
        outcome.final.sealedAnswer,
        outcome.final.workerSignature,
      );
      const step = { jobId, attempt, txHash: dispute.hash };
      await lifecycle.publish(identity, JobLifecycleKind.DISPUTED, { ...step, worker: service.worker });
      await lifecycle.publish(identity, JobLifecycleKind.REFUNDED, { ...step, feeWei: outcome.job.fee });
      await jobs.forget(jobId);
    } catch (error) {
      logger.error({ err: error, jobId: jobId.toString() }, 'dispute not sent');
    }
  }

  /**
   * Refunds a Completed job whose answer never reached the caller (`refundUndelivered`). Until the refund
   * lands the spend hold stays: a refund the call cannot send now is left to the keeper (within the
   * dispute window; after it the job is released and the fee counted as spent, from the hold).
   */
  async #refundUndelivered(jobId: bigint, fee: bigint): Promise<void> {
    const { chain, lifecycle, jobs, logger } = this.options;
    const { identity } = this.call.payment;
    try {
      const refund = await chain.refundUndelivered(jobId);
      await lifecycle.publish(identity, JobLifecycleKind.REFUNDED, {
        jobId,
        txHash: refund.hash,
        feeWei: fee,
      });
      await jobs.forget(jobId);
    } catch (error) {
      logger.warn(
        { err: error, jobId: jobId.toString() },
        'undelivered job not refunded now; the keeper will refund it',
      );
      await jobs.markUndelivered(jobId, identity);
    }
  }

  async #refund(jobId: bigint, fee: bigint): Promise<void> {
    const { chain, lifecycle, jobs, logger } = this.options;
    try {
      const refund = await chain.refundJob(jobId);
      await lifecycle.publish(this.call.payment.identity, JobLifecycleKind.REFUNDED, {
        jobId,
        txHash: refund.hash,
        feeWei: fee,
      });
      await jobs.forget(jobId);
    } catch (error) {
      logger.warn(
        { err: error, jobId: jobId.toString() },
        'refund not sent now; the keeper will refund the job',
      );
    }
  }

  #hintJob(service: ServiceDescription, attempt: number, tx: AttemptTransaction): void {
    this.options.workers.sendHint(service.worker, {
      case: 'jobSubmitted',
      value: {
        hintId: `job-${service.jobId}-${attempt}`,
        jobId: service.jobId.toString(),
        sessionId: service.sessionId.toString(),
        attempt,
        ...(tx.promptBlobHash ? { promptBlobHash: { hex: tx.promptBlobHash } } : {}),
        blockNumber: BigInt(tx.blockNumber),
      },
    });
  }
}
