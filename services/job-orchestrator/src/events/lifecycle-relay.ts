import { setTimeout as sleep } from 'node:timers/promises';
import { fromBinary } from '@bufbuild/protobuf';
import {
  jobLifecycleTopic,
  retryDelayMs,
  type EventBus,
  type Logger,
  type RetryPolicy,
  type Store,
} from '@svc/platform';
import { JobLifecycleEventSchema } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { LIFECYCLE_OUTBOX } from './lifecycle-events.js';

/** The lock that makes one relay pass at a time across replicas. */
const RELAY_LOCK = 'lifecycle-outbox:relay';

export interface LifecycleRelaySettings {
  readonly replicaId: string;
  /** Most events published in one batch. */
  readonly batchSize: number;
  /** How often an idle relay looks for events (other replicas' too); queuing one here wakes it at once. */
  readonly pollIntervalMs: number;
  /** How long a stopping relay keeps publishing what is left; the rest waits in the store for another. */
  readonly stopTimeoutMs: number;
  /** Backoff after a failed pass (the bus or the store down). */
  readonly retry?: RetryPolicy;
}

const PASS_RETRY: RetryPolicy = { initialDelayMs: 500, maxDelayMs: 30_000, multiplier: 2, jitter: 0.2 };
/** Outlives any pass: a publish times out (twice at most, see the bus's per-topic order) well before. */
const LOCK_TTL_MS = 60_000;

/**
 * Hands the lifecycle outbox to the bus, oldest first, one pass at a time across all replicas (a store
 * lock). A pass publishes a batch and only then removes it from the outbox, so every event is published
 * at least once: a pass that fails or dies leaves its batch for the next one, which publishes it again
 * with the same event ids (the key-service settles idempotently). Since a pass always starts from the
 * oldest event, and the bus sends a topic's batches one after another (a retry never overtakes a
 * timed-out send), the events of one reservation reach the bus in outbox order; a repeated one may come
 * again after later ones, never before its original.
 */
export class LifecycleRelay {
  readonly #store: Store;
  readonly #bus: EventBus;
  readonly #logger: Logger;
  readonly #settings: LifecycleRelaySettings;
  #loop: Promise<void> | undefined;
  #stopping = false;
  #wake: (() => void) | undefined;
  #woken = false;

  constructor(store: Store, bus: EventBus, logger: Logger, settings: LifecycleRelaySettings) {
    this.#store = store;
    this.#bus = bus;
    this.#logger = logger;
    this.#settings = settings;
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Publishes soon: an event was queued. Cuts an idle wait short, never a backoff. */
  wake(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /** Stops the loop, then publishes what is left for up to `stopTimeoutMs`, and frees the turn. */
  async stop(): Promise<void> {
    this.#stopping = true;
    this.#wake?.();
    await this.#loop;
    const deadline = Date.now() + this.#settings.stopTimeoutMs;
    try {
      while (Date.now() < deadline && (await this.pass()) === this.#settings.batchSize);
    } catch (error) {
      this.#logger.warn({ err: error }, 'job lifecycle events left in the outbox for another replica');
    }
    const left = await this.#store.queues.length(LIFECYCLE_OUTBOX).catch(() => undefined);
    if (left) this.#logger.info({ left }, 'job lifecycle events left in the outbox for another replica');
    await this.#store.locks.release(RELAY_LOCK, this.#settings.replicaId).catch(() => false);
  }

  /** One pass: publishes up to a batch and removes it from the outbox. 0 when empty or not our turn. */
  async pass(): Promise<number> {
    const { replicaId, batchSize } = this.#settings;
    const turn = await this.#store.locks.tryAcquire(RELAY_LOCK, replicaId, LOCK_TTL_MS);
    if (!turn.acquired) return 0;
    const entries = await this.#store.queues.peek(LIFECYCLE_OUTBOX, batchSize);
    if (entries.length === 0) return 0;
    await this.#bus.publishBatch(
      jobLifecycleTopic,
      entries.map((entry) => {
        const message = fromBinary(JobLifecycleEventSchema, entry.payload);
        return { message, requestId: message.requestId || undefined };
      }),
    );
    await this.#store.queues.remove(
      LIFECYCLE_OUTBOX,
      entries.map((entry) => entry.id),
    );
    this.#logger.debug({ published: entries.length }, 'published job lifecycle events');
    return entries.length;
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#stopping) {
      let waitMs = this.#settings.pollIntervalMs;
      this.#woken = false;
      try {
        const published = await this.pass();
        failures = 0;
        if (published === this.#settings.batchSize) continue;
      } catch (error) {
        failures += 1;
        waitMs = retryDelayMs(this.#settings.retry ?? PASS_RETRY, failures);
        this.#logger.warn(
          { err: error, attempt: failures, retryInMs: waitMs },
          'could not relay job lifecycle events; they stay in the outbox, trying again',
        );
      }
      if (failures === 0 && this.#woken) continue;
      await this.#wait(waitMs, failures === 0);
    }
  }

  /** Sleeps `ms`, or less when stopping (or woken, if `wakeable`). */
  async #wait(ms: number, wakeable: boolean): Promise<void> {
    const abort = new AbortController();
    this.#wake = () => {
      if (wakeable || this.#stopping) abort.abort();
    };
    try {
      await sleep(ms, undefined, { signal: abort.signal, ref: false });
    } catch {
      // Woken.
    } finally {
      this.#wake = undefined;
    }
  }
}
