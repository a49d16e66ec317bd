import { randomUUID } from 'node:crypto';
import { ContractRevertError, JobState, type PromptMessage } from '@svc/chain';
import { modelIdOf } from '@svc/contracts';
import { AppError, isAppError, type Logger, waitAtMost } from '@svc/platform';
import { AsyncQueue } from '@svc/proto';
import {
  delegatePathErrorOf,
  revertOf,
  type ServiceChain,
  type ServiceTransaction,
} from '../chain/service-chain.js';
import {
  JobLifecycleKind,
  type CallIdentity,
  type LifecyclePublisher,
  type LifecycleStep,
} from '../events/lifecycle-events.js';
import type { TrackedJobs } from '../keeper/tracked-jobs.js';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import type { JobOrchestratorMetrics } from '../observability/job-orchestrator-metrics.js';
import type { SessionLease, SessionPool } from '../sessions/session-pool.js';
import type { AnswerRelay, AttemptOutcome } from './answer-relay.js';
import { delegatePaymentRefusal, delegateRefusalOf } from './delegate-payment.js';
import type { ModelCatalogue } from './model-catalogue.js';
import type { PerCallSettlement } from './per-call-settlement.js';
import { preparePrompt, sealPrompt, type PreparedPrompt } from './prompt-envelope.js';

/** An API-key call paid from the key's wallet by the service's delegate (`submitJobFor`). */
export interface DelegatePayment {
  readonly kind: 'delegate';
  readonly wallet: string;
  readonly keyId: string;
  /** The key's spend reservation for the call. */
  readonly reservationId: string;
  readonly maxFee: bigint;
}

/**
 * A call paid per call: the payment-settler verified the payment and holds its nonce; the settlement
 * debits the payer and submits the job in a session the service owns (`submitJobWithDebit`).
 */
export interface PrepaidDebitPayment {
  readonly kind: 'prepaid_debit';
  readonly paymentReservationId: string;
  readonly payer: string;
  readonly amount: bigint;
  /** The API key sent beside the payment, if any, and its spend reservation. */
  readonly keyId?: string;
  readonly spendReservationId?: string;
}

/** One completion call as the gateway hands it over. */
export interface CompletionCall {
  readonly requestId: string;
  readonly model: string;
  readonly messages: readonly PromptMessage[];
  readonly conversationId?: string;
  readonly stream: boolean;
  readonly payment: DelegatePayment | PrepaidDebitPayment;
}

/** The `service` object of an answer. */
export interface ServiceDescription {
  readonly jobId: bigint;
  readonly sessionId: bigint;
  readonly txHash: string;
  readonly worker: string;
  readonly droppedMessages: number;
}

/** The events of `RunCompletion`, in the order the proto documents. */
export type CompletionEvent =
  | { readonly case: 'started'; readonly service: ServiceDescription; readonly fee: bigint }
  | { readonly case: 'delta'; readonly text: string }
  | {
      readonly case: 'completed';
      readonly text: string;
      readonly service: ServiceDescription;
      readonly charged: bigint;
    }
  | { readonly case: 'failed'; readonly error: AppError; readonly jobSubmitted: boolean }
  | {
      readonly case: 'retrying';
      readonly jobId: bigint;
      readonly failedAttempt: number;
      readonly reasonCode: string;
    };

export interface CompletionRunnerOptions {
  readonly chain: ServiceChain;
  readonly chainId: bigint;
  readonly catalogue: ModelCatalogue;
  readonly sessions: SessionPool;
  readonly relay: AnswerRelay;
  readonly workers: Pick<LinkedWorkers, 'live' | 'sendHint' | 'acknowledgeFinal'>;
  readonly jobs: TrackedJobs;
  readonly lifecycle: LifecyclePublisher;
  /** Settles per-call payments; undefined when this server takes none. */
  readonly perCall: PerCallSettlement | undefined;
  /** False when completions are switched off in config. */
  readonly enabled: boolean;
  /** How long a job's `running` mark outlives the call holding it (renewed while the call lives). */
  readonly runMarkTtlMs: number;
  readonly metrics: JobOrchestratorMetrics;
  readonly logger: Logger;
}

/** Waits before asking the settler again about a settlement whose outcome it could not tell. */
const SETTLEMENT_RECHECKS_MS = [500, 1_000, 2_000];

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Sessions tried for one call before giving up on stale pool entries. */
const SESSION_TRIES = 3;

/** Thrown inside a run to end it before anything was submitted. */
class NotSubmitted extends Error {
  constructor(readonly error: AppError) {
    super(error.message);
  }
}

/** Thrown when a submission's outcome cannot be known (the settler was not heard): the job may exist. */
class SubmissionUnknown extends Error {
  constructor(readonly error: AppError) {
    super(error.message);
  }
}

/** Reverts that say a pooled session cannot take a job: another session is tried. */
const STALE_SESSION_REVERTS = new Set(['SessionStateInvalid', 'WorkerNotActive', 'NotSessionWorker']);

/** The transaction that started an attempt (submission, settlement or reassignment). */
interface SubmittedAttempt {
  readonly hash: string;
  readonly blockNumber: number;
  readonly promptBlobHash: string | undefined;
}

/** A job on chain: its first attempt's transaction, and the fee in escrow. */
interface SubmittedJob extends SubmittedAttempt {
  readonly jobId: bigint;
  readonly fee: bigint;
}

/** The prompt blob's versioned hash, from the submission's or reassignment's event. */
function promptBlobHashOf(tx: ServiceTransaction): string | undefined {
  const event = tx.events.find(
    (candidate) => candidate.name === 'JobSubmitted' || candidate.name === 'JobReassigned',
  );
  return event && 'promptBlobHash' in event.args ? String(event.args.promptBlobHash) : undefined;
}

/**
 * Runs completions as JobRegistry jobs: checks the wallet can pay, builds and encrypts the prompt,
 * submits the blob-carrying job in a pooled session, relays and verifies the worker's answer, retries a
 * job that failed before its first output once in a new session, and publishes every step as a
 * lifecycle event.
 *
 * Once a job is submitted its run no longer depends on the caller: a client that leaves stops receiving
 * events, but the run still sees the job to its end and publishes how it ended, which is what settles the
 * call's spend reservation.
 */
export class CompletionRunner {
  readonly #running = new Set<Promise<void>>();

  constructor(private readonly options: CompletionRunnerOptions) {}

  run(call: CompletionCall, signal: AbortSignal): AsyncIterable<CompletionEvent> {
    const events = new AsyncQueue<CompletionEvent>();
    const observe = this.options.metrics.callStarted();
    // A caller that left ended the queue: the run goes on, its events go nowhere but to the metrics.
    const emit = (event: CompletionEvent): void => {
      observe(event);
      if (!events.isEnded) events.push(event);
    };
    const run = new CompletionRun(this.options, call, signal, emit);
    const execution = run.execute().finally(() => {
      events.end();
      this.#running.delete(execution);
    });
    this.#running.add(execution);
    return events;
  }

  /** Calls in progress (each one a job being driven, or being prepared). */
  get inFlight(): number {
    return this.#running.size;
  }

  /**
   * Waits up to `timeoutMs` for the calls in progress to end, so a stopping replica finishes what it
   * submitted; whatever is left then is the job keeper's (on any replica) to drive to its end.
   */
  async drain(timeoutMs: number): Promise<number> {
    await waitAtMost(Promise.allSettled([...this.#running]), timeoutMs);
    return this.#running.size;
  }
}

class CompletionRun {
  readonly #o: CompletionRunnerOptions;
  readonly #call: CompletionCall;
  readonly #signal: AbortSignal;
  readonly #emit: (event: CompletionEvent) => void;
  readonly #identity: CallIdentity;
  readonly #holder = randomUUID();
  #startedSent = false;
  #sentText = '';
  /** Whether a settlement was asked for: until then a per-call call's payment cannot have landed. */
  #settleAsked = false;
  /**
   * Whether the call's REQUESTED event is in the outbox. Until it is, the call records no event at all:
   * none of its reservation went out, and none is needed (the gateway releases its hold on
   * `jobSubmitted: false`, the hold's TTL if the gateway died), so a refused call (no worker, paused, a
   * full outbox, the store down) costs the outbox nothing and a retry loop cannot grow it.
   */
  #requestedRecorded = false;

  constructor(
    options: CompletionRunnerOptions,
    call: CompletionCall,
    signal: AbortSignal,
    emit: (event: CompletionEvent) => void,
  ) {
    this.#o = options;
    this.#call = call;
    this.#signal = signal;
    this.#emit = emit;
    const { payment } = call;
    this.#identity =
      payment.kind === 'delegate'
        ? {
            reservationId: payment.reservationId,
            requestId: call.requestId,
            paymentPath: 'delegate',
            payer: payment.wallet,
            keyId: payment.keyId,
            model: call.model,
          }
        : {
            reservationId: payment.spendReservationId || payment.paymentReservationId,
            requestId: call.requestId,
            paymentPath: 'prepaid_debit',
            payer: payment.payer,
            keyId: payment.keyId ?? '',
            model: call.model,
            paymentReservationId: payment.paymentReservationId,
          };
  }

  async execute(): Promise<void> {
    const { logger } = this.#o;
    try {
      await this.#runJob();
    } catch (error) {
      const refusal = error instanceof NotSubmitted ? error.error : undefined;
      if (refusal) {
        this.#emit({ case: 'failed', error: refusal, jobSubmitted: false });
        if (this.#requestedRecorded)
          this.#publishAfterEnd(JobLifecycleKind.FAILED, { failureCode: refusal.code });
        return;
      }
      if (error instanceof SubmissionUnknown) {
        // The job may be on chain: the keeper adopts a settlement it sees for the service's sessions.
        this.#emit({ case: 'failed', error: error.error, jobSubmitted: true });
        this.#publishAfterEnd(JobLifecycleKind.FAILED, { failureCode: error.error.code });
        return;
      }
      logger.error({ err: error, requestId: this.#call.requestId }, 'completion run failed unexpectedly');
      // A per-call payment not yet sent to settle is certainly not on chain: the gateway frees it.
      const submitted = this.#call.payment.kind === 'delegate' || this.#settleAsked;
      this.#emit({
        case: 'failed',
        error: new AppError('job_failed', { cause: error }),
        jobSubmitted: submitted,
      });
    }
  }

  async #runJob(): Promise<void> {
    const { lifecycle } = this.#o;
    const call = this.#call;
    const model = await this.#refuseUnless(() => this.#checkRunnable());
    // A full outbox (or the store down) refuses the call here, before anything is spent.
    await this.#refuseUnless(() => lifecycle.requested(this.#identity));
    this.#requestedRecorded = true;
    const { payment } = call;
    if (payment.kind === 'delegate') {
      await this.#refuseUnless(() => this.#checkPayment(payment.wallet, model.fee));
      if (payment.maxFee < model.fee)
        throw new NotSubmitted(
          new AppError('job_failed', {
            message: `The fee of ${call.model} rose to ${model.fee} wei while the call was prepared; send it again.`,
          }),
        );
    }
    const prompt = await this.#refuseUnless(async () => preparePrompt(call.model, call.messages));

    // Submission: a stale pooled session (closed, its worker gone) is dropped and another one tried.
    let submitted: { lease: SessionLease; job: SubmittedJob } | undefined;
    for (let tries = 1; !submitted; tries++) {
      this.#throwIfCallerLeft();
      const lease = await this.#refuseUnless(() => this.#acquireSession(model.modelId));
      let job: SubmittedJob | 'session_unusable';
      try {
        this.#throwIfCallerLeft();
        const wire = sealPrompt(prompt, lease.session.publicKey, this.#binding(lease.session.sessionId));
        job = await this.#submit(lease.session.sessionId, wire);
      } catch (error) {
        await lease.release();
        throw error;
      }
      if (job !== 'session_unusable') {
        submitted = { lease, job };
      } else if (tries < SESSION_TRIES) {
        await lease.discard();
      } else {
        await lease.release();
        throw new NotSubmitted(
          new AppError('no_worker_available', {
            message: 'No pooled session could take the job; retry shortly.',
          }),
        );
      }
    }
    await this.#serve(submitted.lease, submitted.job, prompt);
  }

  /**
   * Submits the job in the session: by the service's delegate for the key's wallet, or by settling the
   * per-call payment. 'session_unusable' when the session turned out closed or its worker gone.
   */
  async #submit(sessionId: bigint, wire: Uint8Array): Promise<SubmittedJob | 'session_unusable'> {
    const { chain, lifecycle } = this.#o;
    const { payment } = this.#call;
    if (payment.kind === 'delegate') {
      try {
        const { jobId, fee, tx } = await chain.submitJobFor(payment.wallet, sessionId, payment.maxFee, wire);
        return {
          jobId,
          fee,
          hash: tx.hash,
          blockNumber: tx.blockNumber,
          promptBlobHash: promptBlobHashOf(tx),
        };
      } catch (error) {
        if (STALE_SESSION_REVERTS.has(revertOf(error)?.name ?? '')) return 'session_unusable';
        throw this.#submissionFailure(error);
      }
    }
    const perCall = this.#o.perCall;
    if (!perCall)
      throw new NotSubmitted(
        new AppError('unsupported_scheme', { message: 'This server takes no per-call payments.' }),
      );
    this.#settleAsked = true;
    const settling = {
      paymentReservationId: payment.paymentReservationId,
      sessionId,
      promptWire: wire,
      requestId: this.#call.requestId,
    };
    let outcome = await perCall.settle(settling);
    // An unknown outcome may be a settlement that landed unheard: asked again with the same session and
    // prompt, the settler finds it (or a send still under way ends), and the job is served after all.
    for (const waitMs of SETTLEMENT_RECHECKS_MS) {
      if (!('unknown' in outcome)) break;
      await sleep(waitMs);
      outcome = await perCall.settle(settling);
    }
    if ('sessionUnusable' in outcome) return 'session_unusable';
    if ('refused' in outcome) throw new NotSubmitted(outcome.refused);
    if ('unknown' in outcome) throw new SubmissionUnknown(outcome.unknown);
    const settled = outcome.settled;
    await lifecycle.publish(this.#identity, JobLifecycleKind.PAYMENT_SETTLED, {
      jobId: settled.jobId,
      sessionId,
      txHash: settled.txHash,
      feeWei: settled.fee,
    });
    return { ...settled, hash: settled.txHash };
  }

  /** Runs the submitted job to its end: relay, verification, at most one reassignment, settlement. */
  async #serve(
    firstLease: SessionLease,
    submitted: SubmittedJob,
    firstPrompt: PreparedPrompt,
  ): Promise<void> {
    const { jobId, fee } = submitted;
    let attemptTx: SubmittedAttempt = submitted;
    const { chain, jobs, lifecycle, relay, workers, logger } = this.#o;
    await jobs.track(jobId, this.#identity);
    const run = await jobs.holdRun(jobId, this.#holder, this.#o.runMarkTtlMs);
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
    await lifecycle.publish(this.#identity, JobLifecycleKind.SUBMITTED, {
      jobId,
      sessionId: service.sessionId,
      attempt,
      txHash: attemptTx.hash,
      worker: service.worker,
      feeWei: fee,
    });
    const failedSessions = new Set<bigint>();
    try {
      for (;;) {
        this.#hintJob(service, attempt, attemptTx);
        const outcome = await relay.follow({ jobId, attempt, replyKey: prompt.replyKey }, (text) =>
          this.#delta(service, fee, text),
        );
        if (outcome.kind === 'committed') {
          await lease.release();
          await workers.acknowledgeFinal(jobId, attempt, true);
          await lifecycle.publish(this.#identity, JobLifecycleKind.COMPLETED, {
            jobId,
            attempt,
            worker: service.worker,
            sessionId: service.sessionId,
          });
          await this.#deliver(outcome.text, service, fee, jobId, attempt);
          return;
        }
        if (outcome.kind === 'mismatch') {
          await lease.discard();
          await this.#dispute(jobId, attempt, outcome, service);
          return;
        }
        if (outcome.kind === 'undelivered') {
          await lease.release();
          this.#fail(
            new AppError('job_failed', { message: 'The worker committed an answer but never delivered it.' }),
            service,
          );
          return;
        }
        // The attempt failed. Retry once in a new session, only if nothing reached the client yet.
        await lease.discard();
        failedSessions.add(service.sessionId);
        logger.info({ jobId: jobId.toString(), attempt, reason: outcome.reason }, 'job attempt failed');
        const failedJob = await this.#ensureFailed(jobId, outcome);
        const parameters = await chain.reads.parameters();
        const canRetry =
          !this.#startedSent &&
          failedJob?.state === JobState.Failed &&
          attempt < parameters.maxAttempts &&
          !this.#signal.aborted;
        const retried = canRetry
          ? await this.#reassign(jobId, attempt, failedSessions, service.worker, outcome.reason)
          : undefined;
        if (!retried) {
          this.#fail(new AppError('job_failed', { message: `The job failed: ${outcome.reason}.` }), service);
          if (failedJob?.state === JobState.Failed) await this.#refund(jobId, failedJob.fee);
          return;
        }
        ({ lease, prompt } = retried);
        attempt += 1;
        service = {
          ...service,
          sessionId: lease.session.sessionId,
          worker: lease.session.worker,
          // A per-call job's `tx_hash` stays its settlement, the transaction that took the payment.
          txHash: this.#call.payment.kind === 'prepaid_debit' ? service.txHash : retried.tx.hash,
          droppedMessages: prompt.droppedMessages,
        };
        attemptTx = retried.tx;
      }
    } finally {
      await run.end();
      await relay.retire(jobId);
    }
  }

  #delta(service: ServiceDescription, fee: bigint, text: string): void {
    if (!this.#call.stream || text.length === 0) return;
    this.#start(service, fee);
    this.#sentText += text;
    this.#emit({ case: 'delta', text });
  }

  #start(service: ServiceDescription, fee: bigint): void {
    if (this.#startedSent) return;
    this.#startedSent = true;
    this.#emit({ case: 'started', service, fee });
  }

  /** The divergence rules of docs/protocol.md, then the answer and its lifecycle event. */
  async #deliver(
    text: string,
    service: ServiceDescription,
    fee: bigint,
    jobId: bigint,
    attempt: number,
  ): Promise<void> {
    if (!text.startsWith(this.#sentText)) {
      const error = new AppError('stream_diverged');
      this.#emit({ case: 'failed', error, jobSubmitted: true });
      this.#publishAfterEnd(JobLifecycleKind.DIVERGED, {
        jobId,
        attempt,
        failureCode: error.code,
        sessionId: service.sessionId,
      });
      return;
    }
    const tail = text.slice(this.#sentText.length);
    this.#start(service, fee);
    if (this.#call.stream && tail.length > 0) this.#emit({ case: 'delta', text: tail });
    this.#emit({ case: 'completed', text, service, charged: fee });
    this.#publishAfterEnd(JobLifecycleKind.ANSWERED, {
      jobId,
      attempt,
      feeWei: fee,
      sessionId: service.sessionId,
      worker: service.worker,
    });
  }

  async #dispute(
    jobId: bigint,
    attempt: number,
    outcome: Extract<AttemptOutcome, { kind: 'mismatch' }>,
    service: ServiceDescription,
  ): Promise<void> {
    const { chain, lifecycle, logger } = this.#o;
    logger.warn(
      { jobId: jobId.toString(), attempt, worker: service.worker },
      'committed hash differs from the signed final: disputing',
    );
    this.#fail(
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
      await lifecycle.publish(this.#identity, JobLifecycleKind.DISPUTED, {
        jobId,
        attempt,
        txHash: dispute.hash,
        worker: service.worker,
      });
      await lifecycle.publish(this.#identity, JobLifecycleKind.REFUNDED, {
        jobId,
        attempt,
        txHash: dispute.hash,
        feeWei: outcome.job.fee,
      });
      await this.#o.jobs.forget(jobId);
    } catch (error) {
      logger.error({ err: error, jobId: jobId.toString() }, 'dispute not sent');
    }
  }

  #fail(error: AppError, service: ServiceDescription): void {
    this.#emit({ case: 'failed', error, jobSubmitted: true });
    this.#publishAfterEnd(JobLifecycleKind.FAILED, {
      jobId: service.jobId,
      sessionId: service.sessionId,
      failureCode: error.code,
    });
  }

  /**
   * Publishes the event that goes with the call's end, without waiting for it: the caller has its answer
   * and its stream must not stay open while the store is down. The publisher records it after the call's
   * earlier events and keeps trying until stopped (which waits for it, or logs it in full). Events that
   * must be recorded before the run goes on (REFUNDED before the job is forgotten) are still awaited.
   */
  #publishAfterEnd(kind: JobLifecycleKind, step: LifecycleStep): void {
    this.#o.lifecycle
      .publish(this.#identity, kind, step)
      .catch((error: unknown) =>
        this.#o.logger.error(
          { err: error, kind: JobLifecycleKind[kind], reservationId: this.#identity.reservationId },
          'job lifecycle event not recorded',
        ),
      );
  }

  /** Makes sure a failed attempt is Failed on chain: a job past its deadline is timed out. */
  async #ensureFailed(jobId: bigint, outcome: Extract<AttemptOutcome, { kind: 'failed' }>) {
    const { chain, logger } = this.#o;
    let job = outcome.job;
    if (job.state === JobState.Submitted) {
      try {
        await chain.timeoutJob(jobId);
      } catch (error) {
        // The worker's own failJob may have landed first; the state read below says.
        logger.info({ err: error, jobId: jobId.toString() }, 'timeoutJob not sent');
      }
      job = await chain.reads.getJob(jobId);
    }
    return job;
  }

  async #reassign(
    jobId: bigint,
    failedAttempt: number,
    failedSessions: ReadonlySet<bigint>,
    failedWorker: string,
    reason: string,
  ) {
    const { chain, lifecycle, logger } = this.#o;
    this.#emit({ case: 'retrying', jobId, failedAttempt, reasonCode: 'job_failed' });
    let lease: SessionLease | undefined;
    try {
      lease = await this.#acquireSession(
        modelIdOf(this.#call.model),
        failedSessions,
        new Set([failedWorker.toLowerCase()]),
      );
      const prompt = preparePrompt(this.#call.model, this.#call.messages);
      const wire = sealPrompt(prompt, lease.session.publicKey, this.#binding(lease.session.sessionId));
      const reassigned = await chain.reassignJob(jobId, lease.session.sessionId, wire);
      const tx: SubmittedAttempt = {
        hash: reassigned.hash,
        blockNumber: reassigned.blockNumber,
        promptBlobHash: promptBlobHashOf(reassigned),
      };
      await lifecycle.publish(this.#identity, JobLifecycleKind.REASSIGNED, {
        jobId,
        sessionId: lease.session.sessionId,
        attempt: failedAttempt + 1,
        txHash: tx.hash,
        worker: lease.session.worker,
      });
      return { lease, prompt, tx };
    } catch (error) {
      await lease?.release();
      logger.warn({ err: error, jobId: jobId.toString(), reason }, 'failed job not reassigned');
      return undefined;
    }
  }

  async #refund(jobId: bigint, fee: bigint): Promise<void> {
    const { chain, lifecycle, jobs, logger } = this.#o;
    try {
      const refund = await chain.refundJob(jobId);
      await lifecycle.publish(this.#identity, JobLifecycleKind.REFUNDED, {
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

  #hintJob(service: ServiceDescription, attempt: number, tx: SubmittedAttempt): void {
    const promptBlobHash = tx.promptBlobHash;
    this.#o.workers.sendHint(service.worker, {
      case: 'jobSubmitted',
      value: {
        hintId: `job-${service.jobId}-${attempt}`,
        jobId: service.jobId.toString(),
        sessionId: service.sessionId.toString(),
        attempt,
        ...(promptBlobHash ? { promptBlobHash: { hex: promptBlobHash } } : {}),
        blockNumber: BigInt(tx.blockNumber),
      },
    });
  }

  async #checkRunnable() {
    const { enabled, catalogue, workers } = this.#o;
    if (!enabled)
      throw new AppError('not_configured', { message: 'Completions are switched off on this server.' });
    if (await catalogue.isPaused())
      throw new AppError('not_configured', { message: 'JobRegistry is paused: no new jobs run.' });
    const model = await catalogue.model(this.#call.model);
    const live = await workers.live();
    if (!live.some((worker) => worker.models.includes(model.name))) {
      throw new AppError('not_configured', { message: `No linked worker serves ${model.name} now.` });
    }
    return model;
  }

  async #checkPayment(wallet: string, fee: bigint): Promise<void> {
    const { chain, chainId } = this.#o;
    const position = await chain.reads.delegatePosition(wallet, chain.principal);
    const refusal = delegateRefusalOf(position, fee);
    if (refusal) {
      const context = {
        chainId,
        jobRegistry: chain.jobRegistry,
        delegate: chain.principal,
        chain: chain.reads,
      };
      throw delegatePaymentRefusal(refusal, context, wallet, position, fee);
    }
  }

  #acquireSession(
    modelId: string,
    excludeSessions?: ReadonlySet<bigint>,
    excludeWorkers?: ReadonlySet<string>,
  ): Promise<SessionLease> {
    const { lifecycle } = this.#o;
    const { payment } = this.#call;
    return this.#o.sessions.acquire({
      // Per-call jobs run in sessions the service itself owns: the payments' payTo.
      owner: payment.kind === 'delegate' ? payment.wallet : this.#o.chain.principal,
      model: this.#call.model,
      modelId,
      holder: this.#holder,
      ...(this.#call.conversationId ? { conversationId: this.#call.conversationId } : {}),
      ...(excludeSessions ? { excludeSessions } : {}),
      ...(excludeWorkers ? { excludeWorkers } : {}),
      onOpened: (sessionId, worker, tx) =>
        void lifecycle.publish(this.#identity, JobLifecycleKind.SESSION_OPENED, {
          sessionId,
          worker,
          txHash: tx.hash,
        }),
      onClaimed: (sessionId, worker) =>
        void lifecycle.publish(this.#identity, JobLifecycleKind.SESSION_CLAIMED, { sessionId, worker }),
    });
  }

  #binding(sessionId: bigint) {
    return { chainId: this.#o.chainId, jobRegistry: this.#o.chain.jobRegistry, sessionId };
  }

  #throwIfCallerLeft(): void {
    if (this.#signal.aborted)
      throw new NotSubmitted(
        new AppError('job_failed', { message: 'The caller left before the job was submitted.' }),
      );
  }

  /** Runs a pre-submission step; its AppError (or a refused write) ends the call as not submitted. */
  async #refuseUnless<T>(step: () => Promise<T>): Promise<T> {
    try {
      return await step();
    } catch (error) {
      if (isAppError(error)) throw new NotSubmitted(error);
      if (error instanceof ContractRevertError)
        throw new NotSubmitted(delegatePathErrorOf(error) ?? new AppError('job_failed', { cause: error }));
      throw error;
    }
  }

  #submissionFailure(error: unknown): Error {
    const known = delegatePathErrorOf(error);
    if (known) return new NotSubmitted(known);
    // A simulation refused it: nothing was signed.
    if (error instanceof ContractRevertError)
      return new NotSubmitted(new AppError('job_failed', { cause: error }));
    return error instanceof Error ? error : new Error(String(error));
  }
}
