import { randomUUID } from 'node:crypto';
import { modelIdOf } from '@svc/contracts';
import { AppError, type Logger, waitAtMost } from '@svc/platform';
import { AsyncQueue } from '@svc/proto';
import type { ServiceChain } from '../chain/service-chain.js';
import { JobLifecycleKind, type LifecyclePublisher } from '../events/lifecycle-events.js';
import type { TrackedJobs } from '../keeper/tracked-jobs.js';
import type { HandedOverJobs } from '../link/handed-over-jobs.js';
import type { LinkedWorkers } from '../link/worker-link-server.js';
import type { JobOrchestratorMetrics } from '../observability/job-orchestrator-metrics.js';
import type { SessionLease, SessionPool } from '../sessions/session-pool.js';
import type { SessionWarmer } from '../sessions/session-warmer.js';
import type { AnswerRelay } from './answer-relay.js';
import { CallStream } from './call-stream.js';
import type { CompletionCall, CompletionEvent } from './completion-call.js';
import type { ConfiguredModel, ModelCatalogue } from './model-catalogue.js';
import {
  NotSubmitted,
  SubmissionReverted,
  SubmissionUnknown,
  refuseUnless,
  type AnnouncedJob,
} from './payment-paths/payment-path.js';
import type { PaymentPaths } from './payment-paths/payment-paths.js';
import { preparePrompt, sealPrompt, type PreparedPrompt } from './prompt-envelope.js';
import { SubmittedJobRun, type RunningMark } from './submitted-job-run.js';
import type { WaitingCalls } from './waiting-calls.js';

/** A job its call tracked and marked run before signing its submission. */
interface RecordedJob {
  readonly jobId: bigint;
  readonly running: RunningMark;
}

export type { CompletionCall, CompletionEvent, ServiceDescription } from './completion-call.js';

export interface CompletionRunnerOptions {
  /** Reads each call's payment into its path, where the gRPC request is read. */
  readonly payments: PaymentPaths;
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
  readonly chainId: bigint;
  readonly catalogue: Pick<ModelCatalogue, 'isPaused' | 'model'>;
  readonly sessions: Pick<SessionPool, 'acquire'>;
  /** Told when a call took a session, so a spare is opened for the next one; absent, none is kept. */
  readonly warmer?: Pick<SessionWarmer, 'nudge'>;
  readonly relay: Pick<AnswerRelay, 'follow' | 'retire'>;
  readonly workers: Pick<LinkedWorkers, 'live' | 'sendHint' | 'acknowledgeFinal'>;
  /** Where a job handed to its worker before inclusion is recorded, so every replica takes its frames. */
  readonly handovers: Pick<HandedOverJobs, 'record'>;
  readonly jobs: Pick<TrackedJobs, 'track' | 'holdRun' | 'forget' | 'markUndelivered'>;
  readonly lifecycle: Pick<LifecyclePublisher, 'requested' | 'publish'>;
  /** False when completions are switched off in config. */
  readonly enabled: boolean;
  /** How long a job's `running` mark outlives the call holding it (renewed while the call lives). */
  readonly runMarkTtlMs: number;
  readonly metrics: Pick<JobOrchestratorMetrics, 'callStarted'>;
  /** Counts each call until its caller has the answer (or an error). */
  readonly waiting: WaitingCalls;
  readonly logger: Logger;
}

/** Sessions tried for one call before giving up on stale pool entries. */
const SESSION_TRIES = 3;

/**
 * Runs completions as JobRegistry jobs: checks the call can be paid on its payment path, builds and
 * encrypts the prompt, submits the blob-carrying job in a pooled session, then, as soon as the submission
 * is broadcast, hands the job to its `SubmittedJobRun` (hand-over to the worker before inclusion, relay,
 * verification, retry, dispute, refund). Every step is a lifecycle event.
 *
 * Once a job is submitted its run no longer depends on the caller: a client that leaves stops receiving
 * events, but the run still sees the job to its end and publishes how it ended, which is what settles the
 * call's spend reservation.
 */
export class CompletionRunner {
  readonly #running = new Set<Promise<void>>();

  constructor(private readonly options: CompletionRunnerOptions) {}

  /** Reads a request's payment into the path its call is paid on (or says why it cannot be). */
  get payments(): PaymentPaths {
    return this.options.payments;
  }

  run(call: CompletionCall, signal: AbortSignal): AsyncIterable<CompletionEvent> {
    const events = new AsyncQueue<CompletionEvent>();
    const observed = this.options.metrics.callStarted();
    const answered = this.options.waiting.begin();
    // A caller that left ended the queue: the run goes on, its events go nowhere but to the metrics.
    const emit = (event: CompletionEvent): void => {
      if (event.case === 'started') observed.firstOutput();
      else if (event.case === 'completed') observed.ended('answered');
      else if (event.case === 'failed')
        observed.ended(event.jobSubmitted ? 'failed' : 'refused', event.error.code);
      if (event.case === 'completed' || event.case === 'failed') answered();
      if (events.isEnded) return;
      events.push(event);
      // The caller's stream ends with its answer or error: what the run does after (checking the
      // commitment of an answer delivered on the worker's signed final) is not the caller's to wait for.
      if (event.case === 'completed' || event.case === 'failed') events.end();
    };
    const run = new CompletionRun(this.options, call, signal, emit);
    const execution = run.execute().finally(() => {
      answered();
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

/** One call, up to its submission; then its job's run. */
class CompletionRun {
  readonly #o: CompletionRunnerOptions;
  readonly #call: CompletionCall;
  readonly #signal: AbortSignal;
  readonly #stream: CallStream;
  readonly #holder = randomUUID();
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
    this.#stream = new CallStream(emit, {
      stream: call.stream,
      identity: call.payment.identity,
      lifecycle: options.lifecycle,
      logger: options.logger,
    });
  }

  async execute(): Promise<void> {
    try {
      await this.#runJob();
    } catch (error) {
      if (error instanceof NotSubmitted) {
        this.#stream.failWithout(error.error, false);
        if (this.#requestedRecorded)
          this.#stream.recordAfterEnd(JobLifecycleKind.FAILED, { failureCode: error.error.code });
        return;
      }
      if (error instanceof SubmissionUnknown) {
        // The job may land: no FAILED, which would give the spend hold back. The keeper adopts a job that
        // lands (its events settle the hold); the hold's TTL releases it when nothing ever does.
        this.#stream.failWithout(error.error, true);
        return;
      }
      this.#o.logger.error(
        { err: error, requestId: this.#call.requestId },
        'completion run failed unexpectedly',
      );
      this.#stream.failWithout(
        new AppError('job_failed', { cause: error }),
        this.#call.payment.mayHaveSubmitted(),
      );
    }
  }

  async #runJob(): Promise<void> {
    const { lifecycle } = this.#o;
    const { payment } = this.#call;
    const model = await refuseUnless(() => this.#checkRunnable());
    // A full outbox (or the store down) refuses the call here, before anything is spent. The payment's
    // reads (they spend nothing) go out meanwhile; a refusal of the outbox is the one told.
    const payable = refuseUnless(() => payment.checkPayable(model));
    payable.catch(() => undefined);
    await refuseUnless(() => lifecycle.requested(payment.identity));
    this.#requestedRecorded = true;
    await payable;
    const prompt = await refuseUnless(async () => preparePrompt(this.#call.model, this.#call.messages));
    const { lease, job, running } = await this.#submit(model, prompt);
    const run = new SubmittedJobRun(this.#o, {
      payment,
      stream: this.#stream,
      signal: this.#signal,
      holder: this.#holder,
      ...(running ? { running } : {}),
      prepareAttempt: (failedSessions, failedWorker) => this.#prepareAttempt(failedSessions, failedWorker),
    });
    await run.serve(lease, job, prompt);
  }

  /** Submits the job in a pooled session; a stale one (closed, its worker gone) is dropped and another tried. */
  async #submit(
    model: ConfiguredModel,
    prompt: PreparedPrompt,
  ): Promise<{ lease: SessionLease; job: AnnouncedJob; running?: RunningMark }> {
    for (let tries = 1; ; tries++) {
      this.#throwIfCallerLeft();
      const lease = await refuseUnless(() => this.#acquireSession(model.modelId));
      let submission;
      let recorded: RecordedJob | undefined;
      try {
        this.#throwIfCallerLeft();
        const wire = sealPrompt(prompt, lease.session.publicKey, this.#binding(lease.session.sessionId));
        submission = await this.#call.payment.submit(
          lease.session.sessionId,
          wire,
          prompt.replyKey,
          async (jobId) => {
            try {
              recorded = await this.#recordBeforeSigning(jobId);
            } catch (error) {
              throw new NotSubmitted(
                new AppError('job_failed', {
                  message: 'The job could not be recorded, so it was not submitted; send the request again.',
                  cause: error,
                }),
              );
            }
          },
        );
      } catch (error) {
        await this.#unrecord(recorded, error);
        // A session a submission reverted in is closed or changed on chain: it never goes back to the pool,
        // and its worker, who alone could change it under a checked submission, is counted.
        if (error instanceof SubmissionReverted) await lease.discard('failed');
        else if (error instanceof NotSubmitted) await lease.release();
        // Maybe submitted (an unknown outcome, an unexpected fault): the submission may still land, and a
        // job the next call submitted there would take the same job id. The session leaves the pool.
        else await lease.discard();
        throw error;
      }
      if (submission === 'session_unusable') await this.#unrecord(recorded, undefined);
      else {
        // The session served a paid job: it leaves its payer's and key's budget of unused sessions. The job
        // is on chain: a failure here must not end the call before its run (which releases the lease) starts.
        await lease
          .jobSubmitted()
          .catch((error: unknown) =>
            this.#o.logger.warn(
              { err: error, requestId: this.#call.requestId },
              'session not marked as used',
            ),
          );
        return { lease, job: submission, ...(recorded ? { running: recorded.running } : {}) };
      }
      if (tries < SESSION_TRIES) {
        await lease.discard();
        continue;
      }
      await lease.release();
      throw new NotSubmitted(
        new AppError('no_worker_available', {
          message: 'No pooled session could take the job; retry shortly.',
        }),
      );
    }
  }

  /**
   * Tracks the job under the call and marks it run by the call before its transaction is signed, so that
   * from its broadcast on, whatever happens to the call or this replica, the keeper knows the job: it
   * leaves it to the call while the mark is renewed and drives it to its end once the mark lapses.
   */
  async #recordBeforeSigning(jobId: bigint): Promise<RecordedJob> {
    const { jobs, runMarkTtlMs } = this.#o;
    await jobs.track(jobId, this.#call.payment.identity);
    try {
      return { jobId, running: await jobs.holdRun(jobId, this.#holder, runMarkTtlMs) };
    } catch (error) {
      await jobs.forget(jobId).catch(() => undefined);
      throw error;
    }
  }

  /**
   * Undoes the record of a job whose submission failed to send: forgotten when nothing landed, left to the
   * keeper as an orphan (refunded once answered: its caller is told `job_failed`) when it may land yet.
   */
  async #unrecord(recorded: RecordedJob | undefined, error: unknown): Promise<void> {
    if (!recorded) return;
    const { jobs, logger } = this.#o;
    try {
      if (error instanceof SubmissionUnknown)
        await jobs.track(recorded.jobId, this.#call.payment.identity, { orphan: true });
      else await jobs.forget(recorded.jobId);
    } catch (cause) {
      logger.warn({ err: cause, jobId: recorded.jobId.toString() }, 'tracked job not updated');
    }
    await recorded.running.end().catch(() => undefined);
  }

  /** A new session for a reassigned attempt, and the prompt prepared and sealed to it anew. */
  async #prepareAttempt(failedSessions: ReadonlySet<bigint>, failedWorker: string) {
    const lease = await this.#acquireSession(
      modelIdOf(this.#call.model),
      failedSessions,
      new Set([failedWorker.toLowerCase()]),
    );
    try {
      const prompt = preparePrompt(this.#call.model, this.#call.messages);
      const wire = sealPrompt(prompt, lease.session.publicKey, this.#binding(lease.session.sessionId));
      return { lease, prompt, wire };
    } catch (error) {
      await lease.release();
      throw error;
    }
  }

  async #checkRunnable(): Promise<ConfiguredModel> {
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

  async #acquireSession(
    modelId: string,
    excludeSessions?: ReadonlySet<bigint>,
    excludeWorkers?: ReadonlySet<string>,
  ): Promise<SessionLease> {
    const lease = await this.#requestSession(modelId, excludeSessions, excludeWorkers);
    this.#o.warmer?.nudge(this.#call.model, modelId);
    return lease;
  }

  #requestSession(
    modelId: string,
    excludeSessions?: ReadonlySet<bigint>,
    excludeWorkers?: ReadonlySet<string>,
  ): Promise<SessionLease> {
    const { lifecycle } = this.#o;
    const { identity, sessionOwner } = this.#call.payment;
    return this.#o.sessions.acquire({
      owner: sessionOwner,
      model: this.#call.model,
      modelId,
      holder: this.#holder,
      payer: identity.payer,
      ...(identity.keyId ? { keyId: identity.keyId } : {}),
      ...(this.#call.conversationId ? { conversationId: this.#call.conversationId } : {}),
      // Only a reassignment excludes sessions: its job is on chain and paid already.
      ...(excludeSessions ? { excludeSessions, forReassignment: true } : {}),
      ...(excludeWorkers ? { excludeWorkers } : {}),
      onOpened: (sessionId, worker, tx) =>
        void lifecycle.publish(identity, JobLifecycleKind.SESSION_OPENED, {
          sessionId,
          worker,
          txHash: tx.hash,
        }),
      onClaimed: (sessionId, worker) =>
        void lifecycle.publish(identity, JobLifecycleKind.SESSION_CLAIMED, { sessionId, worker }),
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
}
