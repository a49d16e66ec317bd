import { JobState } from '@svc/chain';
import { AppError, type Logger } from '@svc/platform';
import { promptBlobHashOf, type ServiceChain } from '../chain/service-chain.js';
import { JobLifecycleKind, type LifecyclePublisher } from '../events/lifecycle-events.js';
import type { TrackedJobs } from '../keeper/tracked-jobs.js';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import type { SessionLease } from '../sessions/session-pool.js';
import type { HandedOverJobs } from '../link/handed-over-jobs.js';
import type { FinalAnswer } from '@svc/proto/gen/svc/orchestrator/v1/worker_link_pb';
import type { AnswerRelay, AttemptOutcome, AttemptToRelay, SubmissionLanding } from './answer-relay.js';
import type { CallStream } from './call-stream.js';
import type { ServiceDescription } from './completion-call.js';
import {
  NotSubmitted,
  SubmissionReverted,
  SubmissionUnknown,
  type AnnouncedJob,
  type PaymentPath,
  type PendingHandover,
  type SubmittedJob,
} from './payment-paths/payment-path.js';
import type { PreparedPrompt } from './prompt-envelope.js';

/** A submission's way to the chain, as the run and its relay see it. */
class Landing implements SubmissionLanding {
  #failed = false;
  /** The job on chain once its own bookkeeping is done; rejects as the landing does, or with that bookkeeping's error. */
  readonly settled: Promise<SubmittedJob>;

  constructor(
    readonly jobId: bigint,
    landed: Promise<SubmittedJob>,
    onLanded: (job: SubmittedJob) => Promise<void>,
  ) {
    landed.catch(() => (this.#failed = true));
    this.settled = landed.then(async (job) => {
      await onLanded(job);
      return job;
    });
    // Awaited where the run needs it; a run that ended before never does.
    this.settled.catch(() => undefined);
  }

  /** Whether the submission failed to land (reverted, refused, or with an unknown outcome). */
  get failed(): boolean {
    return this.#failed;
  }
}

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
  /** Where a job handed to its worker before inclusion is recorded, so every replica takes its frames. */
  readonly handovers: Pick<HandedOverJobs, 'record'>;
  /** How long a job's `running` mark outlives the call holding it (renewed while the call lives). */
  readonly runMarkTtlMs: number;
  readonly logger: Logger;
}

/** A job's `running` mark, held by its call and renewed while held. */
export interface RunningMark {
  end(): Promise<void>;
}

/** What the run of one call lends the run of its job. */
export interface SubmittedJobCall {
  readonly payment: PaymentPath;
  readonly stream: CallStream;
  readonly signal: AbortSignal;
  /** Who holds the job's `running` mark (the call's id). */
  readonly holder: string;
  /** The job's `running` mark, when the call took it (and tracked the job) before signing the submission. */
  readonly running?: RunningMark;
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
  /** The job's `running` mark, held from before its submission was signed or, at the latest, its broadcast. */
  #run: RunningMark | undefined;

  constructor(
    private readonly options: SubmittedJobRunOptions,
    private readonly call: SubmittedJobCall,
  ) {}

  async serve(firstLease: SessionLease, announced: AnnouncedJob, firstPrompt: PreparedPrompt): Promise<void> {
    const { jobId } = announced;
    const { chain, relay, logger } = this.options;
    const { payment, stream } = this.call;
    let fee = announced.fee;
    let lease = firstLease;
    let prompt = firstPrompt;
    let attempt = 1;
    let service: ServiceDescription = {
      jobId,
      sessionId: lease.session.sessionId,
      txHash: announced.hash,
      worker: lease.session.worker,
      droppedMessages: prompt.droppedMessages,
    };
    const failedSessions = new Set<bigint>();
    const landing = new Landing(jobId, announced.landed, async (job) => {
      fee = job.fee;
      await this.#recordLanded(job, service, prompt);
    });
    try {
      // Tracked and held from before the signing (the delegate path) or the broadcast (its id is known
      // now): the keeper neither adopts the job as one no call serves when it lands nor drives it while
      // this run does, and takes it over if this replica dies.
      if (this.call.running) this.#run = this.call.running;
      else {
        await this.options.jobs.track(jobId, payment.identity);
        this.#run = await this.options.jobs.holdRun(jobId, this.call.holder, this.options.runMarkTtlMs);
      }
      if (announced.handover) await this.#handOver(service, announced.handover);
      for (;;) {
        const otherReplyKeys = attempt === 1 ? announced.otherReplyKeys : undefined;
        const toRelay = {
          jobId,
          attempt,
          replyKey: prompt.replyKey,
          ...(otherReplyKeys ? { otherReplyKeys } : {}),
          ...(attempt === 1 ? { landing } : {}),
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
        if (outcome.kind === 'unlanded') {
          // Nothing more is followed unless the submission lands after all (then it is followed as a job
          // whose caller is gone: an answer to it is refunded as undelivered).
          if (!(await this.#awaitUnlanded(landing, lease, outcome.reason))) return;
          continue;
        }
        if (outcome.kind === 'signed') {
          await this.#settleSigned(toRelay, outcome, lease, service, () => fee, landing);
          return;
        }
        if (outcome.kind === 'committed') {
          await landing.settled;
          await this.#deliverCommitted(toRelay, outcome.text, lease, service, fee);
          return;
        }
        if (outcome.kind === 'mismatch') {
          await landing.settled;
          await lease.discard('failed');
          await this.#dispute(jobId, attempt, outcome, service);
          return;
        }
        if (outcome.kind === 'undelivered') {
          await landing.settled;
          await lease.release('failed');
          stream.failCommitted(new AppError('job_failed', { message: `The job failed: ${outcome.reason}.` }));
          await this.#refundUndelivered(jobId, fee);
          return;
        }
        // The attempt failed. Retry once in a new session, only if nothing reached the client yet.
        await landing.settled;
        await lease.discard('failed');
        failedSessions.add(service.sessionId);
        logger.info({ jobId: jobId.toString(), attempt, reason: outcome.reason }, 'job attempt failed');
        const failedJob = await this.#ensureFailed(jobId, outcome);
        const { maxAttempts } = await chain.reads.parameters();
        const canRetry =
          !stream.started &&
          !stream.ended &&
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
        this.#hintJob(service, attempt, retried.tx);
      }
    } finally {
      // Whatever ended the run (a thrown chain or store error too), its session's lock goes: a no-op when
      // the path that ended it released or discarded the lease already. A session whose submission is
      // still on its way is kept busy until it lands: its next job id is not known before. One whose
      // submission may land yet (its outcome unknown: a replica stopping under it, a node gone) leaves the
      // pool: a job the next call submitted there would take the same job id.
      const failure = await landing.settled.then(
        () => undefined,
        (error: unknown) => error,
      );
      if (landing.failed && !(failure instanceof NotSubmitted)) await lease.discard();
      else await lease.release();
      await this.#run?.end();
      await relay.retire(jobId);
    }
  }

  /** The job is on chain: SUBMITTED goes out, and the worker is told (it may have started already). */
  async #recordLanded(job: SubmittedJob, service: ServiceDescription, prompt: PreparedPrompt): Promise<void> {
    const { lifecycle } = this.options;
    await lifecycle.publish(this.call.payment.identity, JobLifecycleKind.SUBMITTED, {
      jobId: job.jobId,
      sessionId: service.sessionId,
      attempt: 1,
      txHash: job.hash,
      worker: service.worker,
      feeWei: job.fee,
      droppedMessages: prompt.droppedMessages,
    });
    this.#hintJob(service, 1, job);
  }

  /**
   * Hands the signed submission to the session's worker before it is mined (`pending_job`), once the shared
   * store lets every replica's frame intake take its frames. A worker linked to another replica, or one
   * that declines, learns of the job from the chain as before.
   */
  async #handOver(service: ServiceDescription, handover: PendingHandover): Promise<void> {
    const { handovers, workers, logger } = this.options;
    try {
      await handovers.record(service.jobId, { worker: service.worker, sessionId: service.sessionId });
    } catch (error) {
      logger.warn({ err: error, jobId: service.jobId.toString() }, 'job not handed over before inclusion');
      return;
    }
    workers.sendHint(service.worker, {
      case: 'pendingJob',
      value: {
        hintId: `pending-${service.jobId}`,
        jobId: service.jobId.toString(),
        sessionId: service.sessionId.toString(),
        attempt: 1,
        rawTransaction: handover.signedTransaction,
        blob: handover.blob,
        kzgCommitment: handover.kzgCommitment,
      },
    });
  }

  /**
   * A job handed over before inclusion that is not on chain and will not be answered as it stands: its
   * submission failed to land, or its worker gave it up unmined. The caller is told `job_failed` (with its
   * job possibly submitted: its payment stays held) and the session is retired, since its worker signed for
   * a job id that may yet be taken (docs/protocol.md, Starting before inclusion). Then the submission's own
   * outcome is waited for, as long as the sender keeps rebroadcasting it: nothing landed gives the payment
   * back (FAILED), an unknown outcome is the keeper's, and a job that lands after all is followed (true).
   */
  async #awaitUnlanded(landing: Landing, lease: SessionLease, reason: string): Promise<boolean> {
    const { stream } = this.call;
    this.options.logger.info(
      { jobId: landing.jobId.toString(), reason },
      'job handed over before inclusion is not on chain: the call ends, its session is retired',
    );
    const failure = landing.failed
      ? await landing.settled.then(
          () => undefined,
          (error: unknown) => error,
        )
      : undefined;
    // A revert found the session closed or its worker gone, which only the worker can do under a checked
    // submission: it is counted (WorkerReputation); a submission not mined is nobody's fault.
    await lease.discard(failure instanceof SubmissionReverted ? 'failed' : undefined);
    if (!landing.failed)
      stream.failWithout(new AppError('job_failed', { message: `The job failed: ${reason}.` }), true);
    const { jobs } = this.options;
    const { identity } = this.call.payment;
    try {
      await landing.settled;
      return true;
    } catch (error) {
      if (error instanceof NotSubmitted) {
        stream.failWithout(error.error, false);
        stream.recordAfterEnd(JobLifecycleKind.FAILED, { failureCode: error.error.code });
        await jobs.forget(landing.jobId);
      } else if (error instanceof SubmissionUnknown) {
        this.options.logger.warn(
          { err: error.error, jobId: landing.jobId.toString() },
          'submission outcome unknown: the keeper settles the job if it lands',
        );
        stream.failWithout(error.error, true);
        // It may land yet, with nobody to serve it: refunded once answered (a resent payment may be served first).
        await jobs.track(landing.jobId, identity, { orphan: true });
      } else throw error;
      return false;
    }
  }

  /** The slow path's end: the committed answer delivered (or, diverged, refunded as undelivered). */
  async #deliverCommitted(
    toRelay: Omit<AttemptToRelay, 'signedBy'>,
    text: string,
    lease: SessionLease,
    service: ServiceDescription,
    fee: bigint,
  ): Promise<void> {
    const { logger } = this.options;
    const { payment, stream } = this.call;
    const { jobId, attempt } = toRelay;
    // The worker answered: its record counts it (WorkerReputation, the pool's choice of workers).
    await lease.release('answered');
    await this.#recordCommitted(jobId, attempt, service);
    // A stream that diverged from the committed answer delivered nothing usable: refunded.
    if (!stream.deliver(text, service, fee, attempt)) {
      await this.#refundUndelivered(jobId, fee);
      return;
    }
    await this.#markAnswered(jobId);
    await payment.answered?.().catch((error: unknown) => logger.warn({ err: error }, 'answer not marked'));
  }

  /**
   * The call recorded ANSWERED: the keeper, which publishes it for a Completed job no call serves (its call
   * died after the commitment), need not say it again.
   */
  async #markAnswered(jobId: bigint): Promise<void> {
    const { jobs, logger } = this.options;
    await jobs
      .track(jobId, this.call.payment.identity, { answered: true })
      .catch((error: unknown) =>
        logger.warn({ err: error, jobId: jobId.toString() }, 'job not marked answered'),
      );
  }

  /**
   * The fast path's end (docs/protocol.md, Ending on the signed final): the caller gets the signed final
   * at once ([DONE], or `stream_diverged` when it does not extend what was streamed), then the commitment
   * is checked. The same final committed: ANSWERED (or DIVERGED and the undelivered refund) as on the slow
   * path. Another hash committed: disputed, the worker slashed and the payer refunded. Never committed
   * (failed or timed out): the job is failed and refunded, so the worker, who did the work and did not
   * commit it, bears the loss; the payer is charged only for a committed job. A submission that never
   * lands charges nobody: the caller had its answer, which the worker and the service bear.
   */
  async #settleSigned(
    toRelay: Omit<AttemptToRelay, 'signedBy'>,
    { text, final }: { text: string; final: FinalAnswer },
    lease: SessionLease,
    service: ServiceDescription,
    feeOf: () => bigint,
    landing: Landing,
  ): Promise<void> {
    const { relay, logger } = this.options;
    const { payment, stream } = this.call;
    const { jobId, attempt } = toRelay;
    // Marked before the caller can see its answer: a resent payment is refused as used from then on.
    if (stream.extendsSent(text))
      await payment.answered?.().catch((error: unknown) => logger.warn({ err: error }, 'answer not marked'));
    const delivered = stream.deliver(text, service, feeOf(), attempt, true);
    try {
      await landing.settled;
    } catch (error) {
      if (!landing.failed) throw error;
      stream.dropDeferred();
      await this.#awaitUnlanded(landing, lease, 'its submission did not land');
      return;
    }
    const fee = feeOf();
    // The session takes the caller's next call once its job is on chain (its next job id is known then),
    // without waiting for the commitment: its worker answered (a commitment that turns out otherwise is
    // disputed and slashed, which is what keeps it honest, not this session's idleness).
    await lease.release('answered');
    const { landing: _landed, ...onChain } = toRelay;
    // Checked against the final the caller was given, not a frame read again from the store.
    const settled = await relay.follow({ ...onChain, signedFinal: final }, () => undefined);
    switch (settled.kind) {
      case 'committed':
        await this.#recordCommitted(jobId, attempt, service);
        if (stream.recordDeferred() && delivered) await this.#markAnswered(jobId);
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
      case 'signed':
      case 'unlanded': {
        stream.dropDeferred();
        logger.warn(
          { jobId: jobId.toString(), attempt, worker: service.worker },
          'the worker signed a final and never committed it: failing and refunding the job',
        );
        if (settled.kind !== 'failed') return;
        const failedJob = await this.#ensureFailed(jobId, settled);
        if (failedJob.state === JobState.Failed) await this.#refund(jobId, failedJob.fee);
        return;
      }
    }
  }

  /** The worker's final is committed on chain: it is told so, and COMPLETED goes out. */
  async #recordCommitted(jobId: bigint, attempt: number, service: ServiceDescription): Promise<void> {
    await this.#acknowledgeFinal(jobId, attempt);
    await this.options.lifecycle.publish(this.call.payment.identity, JobLifecycleKind.COMPLETED, {
      jobId,
      attempt,
      worker: service.worker,
      sessionId: service.sessionId,
    });
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
        outcome.job,
        outcome.commitment,
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
