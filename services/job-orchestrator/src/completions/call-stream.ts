import { AppError, type Logger } from '@svc/platform';
import {
  JobLifecycleKind,
  type CallIdentity,
  type LifecyclePublisher,
  type LifecycleStep,
} from '../events/lifecycle-events.js';
import type { CompletionEvent, ServiceDescription } from './completion-call.js';

/**
 * What one call tells its caller, and the lifecycle event that goes with how it ended: `started` once,
 * before the first delta (a whole answer gets it with its text), deltas as they come when the call
 * streams, and the divergence rules of docs/protocol.md when the final answer arrives.
 */
export class CallStream {
  #started = false;
  /** Whether the caller was given its answer or an error: nothing more reaches it. */
  #ended = false;
  #sentText = '';
  /** When the call was accepted, and how long its first output took (for the usage record). */
  readonly #acceptedAt = Date.now();
  #firstOutputMs: number | undefined;
  /** When the caller got its answer or error, if a delivery recorded its end. */
  #endedAt: number | undefined;
  /** The end event a fast-path delivery keeps back until the commitment is checked. */
  #deferred: { kind: JobLifecycleKind; step: LifecycleStep } | undefined;

  constructor(
    private readonly emit: (event: CompletionEvent) => void,
    private readonly options: {
      readonly stream: boolean;
      readonly identity: CallIdentity;
      readonly lifecycle: Pick<LifecyclePublisher, 'publish'>;
      readonly logger: Logger;
    },
  ) {}

  /** Whether anything reached the caller: a failed job is then not retried (the text would change). */
  get started(): boolean {
    return this.#started;
  }

  /**
   * Whether the caller's call is over: it was answered, or told of an error while its job could still land
   * (a submission its worker gave up before inclusion). An answer after that is undelivered.
   */
  get ended(): boolean {
    return this.#ended;
  }

  delta(service: ServiceDescription, fee: bigint, text: string): void {
    if (!this.options.stream || text.length === 0 || this.#ended) return;
    this.#start(service, fee);
    this.#sentText += text;
    this.emit({ case: 'delta', text });
  }

  /** Whether `deliver(text, …)` would answer the caller (the text extends what was sent), not diverge. */
  extendsSent(text: string): boolean {
    return text.startsWith(this.#sentText);
  }

  retrying(jobId: bigint, failedAttempt: number): void {
    this.emit({ case: 'retrying', jobId, failedAttempt, reasonCode: 'job_failed' });
  }

  /**
   * The committed answer: its unsent tail and `completed` (true), or `stream_diverged` when it does not
   * extend the sent text (false). DIVERGED does not give the spend hold back: the job is Completed on
   * chain, so the hold stays until the job is refunded (REFUNDED) or paid out (ANSWERED at release).
   */
  deliver(
    text: string,
    service: ServiceDescription,
    fee: bigint,
    attempt: number,
    deferRecord = false,
  ): boolean {
    const { jobId, sessionId, worker, droppedMessages } = service;
    // The caller was told of an error already: the answer never reached it (refunded as undelivered).
    if (this.#ended) return false;
    const record = (kind: JobLifecycleKind, step: LifecycleStep): void => {
      this.#endedAt = Date.now();
      if (deferRecord) this.#deferred = { kind, step };
      else this.recordAfterEnd(kind, step);
    };
    this.#ended = true;
    if (!text.startsWith(this.#sentText)) {
      const error = new AppError('stream_diverged');
      this.emit({ case: 'failed', error, jobSubmitted: true });
      record(JobLifecycleKind.DIVERGED, {
        jobId,
        attempt,
        failureCode: error.code,
        sessionId,
        droppedMessages,
      });
      return false;
    }
    const tail = text.slice(this.#sentText.length);
    this.#start(service, fee);
    if (this.options.stream && tail.length > 0) this.emit({ case: 'delta', text: tail });
    this.emit({ case: 'completed', text, service, charged: fee });
    record(JobLifecycleKind.ANSWERED, {
      jobId,
      attempt,
      feeWei: fee,
      sessionId,
      worker,
      droppedMessages,
    });
    return true;
  }

  /**
   * Records the event a `deliver(…, deferRecord)` kept back: on the fast path the answer goes out on the
   * worker's signed final, and ANSWERED (which counts the fee as spent) or DIVERGED only once the chain
   * holds the matching commitment. Returns false when nothing was kept back.
   */
  recordDeferred(): boolean {
    const deferred = this.#deferred;
    if (!deferred) return false;
    this.#deferred = undefined;
    this.recordAfterEnd(deferred.kind, deferred.step);
    return true;
  }

  /** Drops the event a deferred delivery kept back: the commitment turned out otherwise (disputed, never made). */
  dropDeferred(): void {
    this.#deferred = undefined;
  }

  /**
   * The call ends with its job Completed on chain but its answer not delivered. No event that gives the
   * spend hold back goes with it: the job's refund (REFUNDED) or its release (ANSWERED) settles the hold.
   */
  failCommitted(error: AppError): void {
    this.#end({ case: 'failed', error, jobSubmitted: true });
  }

  /** The call ends with its job on chain, unanswered (recorded even when the caller heard of it earlier). */
  fail(error: AppError, service: ServiceDescription): void {
    this.#end({ case: 'failed', error, jobSubmitted: true });
    this.recordAfterEnd(JobLifecycleKind.FAILED, {
      jobId: service.jobId,
      sessionId: service.sessionId,
      failureCode: error.code,
      droppedMessages: service.droppedMessages,
    });
  }

  /** The call ends without a job, or without knowing whether its job landed. */
  failWithout(error: AppError, jobSubmitted: boolean): void {
    this.#end({ case: 'failed', error, jobSubmitted });
  }

  /** Tells the caller how its call ended, once. */
  #end(event: Extract<CompletionEvent, { case: 'failed' }>): void {
    if (this.#ended) return;
    this.#ended = true;
    this.emit(event);
  }

  /**
   * Records the event that goes with the call's end, without waiting for it: the caller has its answer
   * and its stream must not stay open while the store is down. The publisher records it after the call's
   * earlier events and keeps trying until stopped (which waits for it, or logs it in full). Events that
   * must be recorded before the run goes on (REFUNDED before the job is forgotten) are still awaited.
   */
  recordAfterEnd(kind: JobLifecycleKind, step: LifecycleStep): void {
    const { lifecycle, identity, logger } = this.options;
    lifecycle
      .publish(identity, kind, {
        ...step,
        ...(this.#firstOutputMs === undefined ? {} : { firstOutputMs: this.#firstOutputMs }),
        durationMs: (this.#endedAt ?? Date.now()) - this.#acceptedAt,
      })
      .catch((error: unknown) =>
        logger.error(
          { err: error, kind: JobLifecycleKind[kind], reservationId: identity.reservationId },
          'job lifecycle event not recorded',
        ),
      );
  }

  #start(service: ServiceDescription, fee: bigint): void {
    if (this.#started) return;
    this.#started = true;
    this.#firstOutputMs = Date.now() - this.#acceptedAt;
    this.emit({ case: 'started', service, fee });
  }
}
