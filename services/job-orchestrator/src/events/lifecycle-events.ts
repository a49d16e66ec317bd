import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  AppError,
  currentTraceHeaders,
  type Logger,
  retryDelayMs,
  type RetryPolicy,
  type Store,
  waitAtMost,
} from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  PaymentPath,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';

/** The store queue every replica puts its lifecycle events in; the relay hands them to the bus. */
export const LIFECYCLE_OUTBOX = 'job-lifecycle-outbox';

/** What every event of one call repeats: who pays, for which key and model, under which reservation. */
export interface CallIdentity {
  readonly reservationId: string;
  readonly requestId: string;
  readonly paymentPath: 'delegate' | 'prepaid_debit';
  readonly payer: string;
  readonly keyId: string;
  readonly model: string;
  readonly paymentReservationId?: string;
}

/** The step-specific fields of an event. */
export interface LifecycleStep {
  readonly sessionId?: bigint;
  readonly jobId?: bigint;
  readonly attempt?: number;
  readonly txHash?: string;
  readonly worker?: string;
  readonly feeWei?: bigint;
  readonly failureCode?: string;
  readonly occurredAt?: Date;
  /** Oldest messages left out of the prompt (the answer's `dropped_messages`). */
  readonly droppedMessages?: number;
  /** From accepting the call to its first output reaching the caller; only on the call's own end. */
  readonly firstOutputMs?: number;
  /** From accepting the call to its end; only on the call's own end. */
  readonly durationMs?: number;
}

export { JobLifecycleKind };

export interface LifecyclePublisherSettings {
  /** Most events the outbox holds before new calls are refused (events of calls under way always go in). */
  readonly maxEvents: number;
  /** Told after each event is queued (the relay's wake-up). */
  readonly onQueued?: () => void;
  /** Backoff between attempts to queue an event while the store fails. */
  readonly retry?: RetryPolicy;
}

const STORE_RETRY: RetryPolicy = { initialDelayMs: 100, maxDelayMs: 5_000, multiplier: 2, jitter: 0.2 };

/** An event handed to `publish` and not recorded yet. */
interface PendingEvent {
  readonly payload: Uint8Array;
  readonly call: CallIdentity;
  readonly kind: JobLifecycleKind;
  /** Logged as lost by a stopping publisher: not tried again. */
  givenUp: boolean;
  /** Resolves once given up, even while a store command for it still hangs. */
  readonly gaveUp: Promise<void>;
  readonly giveUp: () => void;
}

/**
 * Records `svc.job-lifecycle.v1` events for calls (docs/events.md) in the outbox, a queue in the shared
 * store that the LifecycleRelay hands to the bus: the completion path never waits on Kafka, and an event
 * outlives a broker outage and the replica that recorded it.
 *
 * The events of one reservation go into the outbox one after another, in the order they were published
 * here, so they reach the bus in that order. A new call starts with `requested`, which a full outbox (or
 * a failing store) refuses, loudly and before anything is spent; a call refused there records nothing
 * more. An event of a call under way is never refused: it settles spend. While the store fails, such an
 * event is retried with a backoff (later events of its call wait behind it) until it is in, or the
 * publisher stops, which logs every event it could not record at error level, in full.
 */
export class LifecyclePublisher {
  readonly #store: Store;
  readonly #logger: Logger;
  readonly #settings: LifecyclePublisherSettings;
  /** Per reservation, its last event until recorded: the next one waits for it. */
  readonly #tails = new Map<string, Promise<void>>();
  readonly #unrecorded = new Set<PendingEvent>();
  /** Cuts the backoff of events being retried short once stopped. */
  readonly #stopping = new AbortController();
  #stopped = false;

  constructor(store: Store, logger: Logger, settings: LifecyclePublisherSettings) {
    this.#store = store;
    this.#logger = logger;
    this.#settings = settings;
  }

  /**
   * Records a new call's REQUESTED event, or refuses the call while the outbox is full or the store
   * fails: AppError `job_failed`, thrown before anything was submitted (nothing is spent, the gateway
   * releases the hold). A refused call publishes nothing more: the outbox bound holds.
   */
  async requested(call: CallIdentity): Promise<void> {
    const refusal = (cause?: unknown) =>
      new AppError('job_failed', {
        message: 'The server cannot record new jobs now; try again later.',
        ...(cause === undefined ? {} : { cause }),
      });
    let queued: string | null;
    try {
      queued = await this.#store.queues.push(
        LIFECYCLE_OUTBOX,
        encode(call, JobLifecycleKind.REQUESTED, {}),
        this.#settings.maxEvents,
      );
    } catch (error) {
      this.#logger.warn(
        { err: error, reservationId: call.reservationId },
        'could not record a new call in the job lifecycle outbox (is the store down?): refusing it',
      );
      throw refusal(error);
    }
    if (queued === null) {
      this.#logger.error(
        { reservationId: call.reservationId, maxEvents: this.#settings.maxEvents },
        'job lifecycle outbox is full (is the bus down?): refusing a new call',
      );
      throw refusal();
    }
    this.#settings.onQueued?.();
  }

  /**
   * Records one event of a call under way (its REQUESTED recorded), after the call's earlier events;
   * resolves once it is in, or given up by `stop` (logged). Never rejects.
   */
  publish(call: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep = {}): Promise<void> {
    let giveUp = (): void => undefined;
    const gaveUp = new Promise<void>((resolve) => (giveUp = resolve));
    const event: PendingEvent = {
      payload: encode(call, kind, step),
      call,
      kind,
      givenUp: false,
      gaveUp,
      giveUp,
    };
    this.#unrecorded.add(event);
    const key = call.reservationId;
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const recorded = previous
      .then(() => Promise.race([this.#record(event), event.gaveUp]))
      .catch((error: unknown) => this.#giveUp(event, error));
    this.#tails.set(key, recorded);
    void recorded.then(() => {
      if (this.#tails.get(key) === recorded) this.#tails.delete(key);
    });
    return recorded;
  }

  /**
   * Stops retrying: waits up to `timeoutMs` for events still being recorded, then gives up on the rest,
   * each logged in full at error level, and returns at once. Call once no call or keeper publishes any
   * more (a later event is tried once, and logged if that fails).
   */
  async stop(timeoutMs: number): Promise<void> {
    await waitAtMost(Promise.all([...this.#tails.values()]), timeoutMs);
    this.#stopped = true;
    this.#stopping.abort();
    for (const event of [...this.#unrecorded]) this.#giveUp(event, undefined);
  }

  async #record(event: PendingEvent): Promise<void> {
    const retry = this.#settings.retry ?? STORE_RETRY;
    for (let attempt = 1; !event.givenUp; attempt++) {
      try {
        await this.#store.queues.push(LIFECYCLE_OUTBOX, event.payload);
        this.#unrecorded.delete(event);
        if (event.givenUp)
          this.#logger.warn(
            { kind: JobLifecycleKind[event.kind], reservationId: event.call.reservationId },
            'job lifecycle event recorded after all (it was logged as lost): do not publish it by hand',
          );
        this.#settings.onQueued?.();
        return;
      } catch (error) {
        if (event.givenUp) return;
        if (this.#stopped) {
          this.#giveUp(event, error);
          return;
        }
        const retryInMs = retryDelayMs(retry, attempt);
        this.#logger.warn(
          {
            err: error,
            kind: JobLifecycleKind[event.kind],
            reservationId: event.call.reservationId,
            attempt,
            retryInMs,
          },
          'could not record a job lifecycle event; retrying',
        );
        await sleep(retryInMs, undefined, { ref: false, signal: this.#stopping.signal }).catch(
          () => undefined,
        );
      }
    }
  }

  /** Loud and complete: an operator can publish it by hand (base64 protobuf JobLifecycleEvent). */
  #giveUp(event: PendingEvent, error: unknown): void {
    if (event.givenUp || !this.#unrecorded.has(event)) return;
    event.givenUp = true;
    event.giveUp();
    this.#logger.error(
      {
        ...(error === undefined ? {} : { err: error }),
        kind: JobLifecycleKind[event.kind],
        reservationId: event.call.reservationId,
        event: Buffer.from(event.payload).toString('base64'),
      },
      'job lifecycle event lost: not recorded in the store before the publisher stopped',
    );
  }
}

/** A uint32 of milliseconds (a clock that stepped back reads 0). */
function wholeMs(ms: number): number {
  return Math.min(Math.max(Math.round(ms), 0), 0xffff_ffff);
}

/** The event of one step, in the trace of the call it is recorded from (the relay publishes it there). */
function encode(call: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep): Uint8Array {
  const init: MessageInitShape<typeof JobLifecycleEventSchema> = {
    ...currentTraceHeaders(),
    eventId: randomUUID(),
    occurredAt: timestampFromDate(step.occurredAt ?? new Date()),
    reservationId: call.reservationId,
    kind,
    requestId: call.requestId,
    paymentPath: call.paymentPath === 'delegate' ? PaymentPath.DELEGATE : PaymentPath.PREPAID_DEBIT,
    payer: { hex: call.payer },
    keyId: call.keyId,
    model: call.model,
    sessionId: step.sessionId?.toString() ?? '',
    jobId: step.jobId?.toString() ?? '',
    attempt: step.attempt ?? 0,
    failureCode: step.failureCode ?? '',
    paymentReservationId: call.paymentReservationId ?? '',
    droppedMessages: step.droppedMessages ?? 0,
    ...(step.firstOutputMs !== undefined ? { firstOutputMs: wholeMs(step.firstOutputMs) } : {}),
    ...(step.durationMs !== undefined ? { durationMs: wholeMs(step.durationMs) } : {}),
    ...(step.txHash ? { txHash: { hex: step.txHash.toLowerCase() } } : {}),
    ...(step.worker ? { worker: { hex: step.worker } } : {}),
    ...(step.feeWei !== undefined ? { feeWei: { decimal: step.feeWei.toString() } } : {}),
  };
  return toBinary(JobLifecycleEventSchema, create(JobLifecycleEventSchema, init));
}
