import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { create, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { AppError, retryDelayMs, type Logger, type RetryPolicy, type Store } from '@svc/platform';
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

/**
 * Records `svc.job-lifecycle.v1` events for calls (docs/events.md) in the outbox, a queue in the shared
 * store that the LifecycleRelay hands to the bus: the completion path never waits on Kafka, and an event
 * outlives a broker outage and the replica that recorded it.
 *
 * The events of one reservation go into the outbox one after another, in the order they were published
 * here, so they reach the bus in that order. A full outbox refuses new calls (`requested`), loudly and
 * before anything is spent; it never refuses an event of a call under way, which settles spend. While the
 * store fails, an event is retried with a backoff (later events of its call wait behind it) until it is
 * in, or the publisher stops, which logs every event it could not record at error level, in full.
 */
export class LifecyclePublisher {
  readonly #store: Store;
  readonly #logger: Logger;
  readonly #settings: LifecyclePublisherSettings;
  /** Per reservation, its last event until recorded: the next one waits for it. */
  readonly #tails = new Map<string, Promise<void>>();
  #stopped = false;

  constructor(store: Store, logger: Logger, settings: LifecyclePublisherSettings) {
    this.#store = store;
    this.#logger = logger;
    this.#settings = settings;
  }

  /**
   * Records a new call's REQUESTED event, or refuses the call while the outbox is full: AppError
   * `job_failed`, thrown before anything was submitted (nothing is spent, the gateway releases the hold).
   */
  async requested(call: CallIdentity): Promise<void> {
    const queued = await this.#store.queues.push(
      LIFECYCLE_OUTBOX,
      encode(call, JobLifecycleKind.REQUESTED, {}),
      this.#settings.maxEvents,
    );
    if (queued === null) {
      this.#logger.error(
        { reservationId: call.reservationId, maxEvents: this.#settings.maxEvents },
        'job lifecycle outbox is full (is the bus down?): refusing a new call',
      );
      throw new AppError('job_failed', {
        message: 'The server cannot record new jobs now; try again later.',
      });
    }
    this.#settings.onQueued?.();
  }

  /** Records one event of a call under way, after the call's earlier events; resolves once it is in. */
  publish(call: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep = {}): Promise<void> {
    const payload = encode(call, kind, step);
    const key = call.reservationId;
    const previous = this.#tails.get(key) ?? Promise.resolve();
    const recorded = previous.then(() => this.#record(payload, call, kind));
    this.#tails.set(key, recorded);
    void recorded.then(() => {
      if (this.#tails.get(key) === recorded) this.#tails.delete(key);
    });
    return recorded;
  }

  /**
   * Stops retrying: waits up to `timeoutMs` for events still being recorded, then gives up on the rest
   * (each logged in full). Call once no call or keeper publishes any more.
   */
  async stop(timeoutMs: number): Promise<void> {
    const pending = Promise.all([...this.#tails.values()]);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([pending, timeout]);
    clearTimeout(timer);
    this.#stopped = true;
    await pending;
  }

  async #record(payload: Uint8Array, call: CallIdentity, kind: JobLifecycleKind): Promise<void> {
    const retry = this.#settings.retry ?? STORE_RETRY;
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#store.queues.push(LIFECYCLE_OUTBOX, payload);
        this.#settings.onQueued?.();
        return;
      } catch (error) {
        const context = {
          err: error,
          kind: JobLifecycleKind[kind],
          reservationId: call.reservationId,
          attempt,
        };
        if (this.#stopped) {
          // Loud and complete: an operator can publish it by hand (base64 protobuf JobLifecycleEvent).
          this.#logger.error(
            { ...context, event: Buffer.from(payload).toString('base64') },
            'job lifecycle event lost: the store failed until the publisher stopped',
          );
          return;
        }
        const retryInMs = retryDelayMs(retry, attempt);
        this.#logger.warn({ ...context, retryInMs }, 'could not record a job lifecycle event; retrying');
        await sleep(retryInMs, undefined, { ref: false });
      }
    }
  }
}

function encode(call: CallIdentity, kind: JobLifecycleKind, step: LifecycleStep): Uint8Array {
  const init: MessageInitShape<typeof JobLifecycleEventSchema> = {
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
    ...(step.txHash ? { txHash: { hex: step.txHash.toLowerCase() } } : {}),
    ...(step.worker ? { worker: { hex: step.worker } } : {}),
    ...(step.feeWei !== undefined ? { feeWei: { decimal: step.feeWei.toString() } } : {}),
  };
  return toBinary(JobLifecycleEventSchema, create(JobLifecycleEventSchema, init));
}
