import { setTimeout as sleep } from 'node:timers/promises';
import { fromBinary } from '@bufbuild/protobuf';
import { timestampDate } from '@bufbuild/protobuf/wkt';
import {
  Deadline,
  type EventBus,
  jobLifecycleTopic,
  type Logger,
  type QueuedEntry,
  retryDelayMs,
  type RetryPolicy,
  type Store,
  waitAtMost,
} from '@svc/platform';
import {
  JobLifecycleEventSchema,
  JobLifecycleKind,
  type JobLifecycleEvent,
} from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { LIFECYCLE_OUTBOX } from './lifecycle-events.js';

/** The lock that makes one relay pass at a time across replicas. */
export const RELAY_LOCK = 'lifecycle-outbox:relay';

export interface LifecycleRelaySettings {
  readonly replicaId: string;
  /** Most events published in one batch. */
  readonly batchSize: number;
  /**
   * How often the relay looks for events: the lock holder's when idle (events queued on its own replica
   * wake it at once), and every other replica's, which waits this long between tries for the turn.
   */
  readonly pollIntervalMs: number;
  /** Backoff after a failed pass (the bus or the store down). */
  readonly retry?: RetryPolicy;
  /**
   * How long a turn holds the lock; a pass is cut off at a third of it. Default 15 s: a replica that dies
   * holding it stalls the outbox that long (the same bound as a dead call's running mark).
   */
  readonly lockTtlMs?: number;
}

const PASS_RETRY: RetryPolicy = { initialDelayMs: 500, maxDelayMs: 30_000, multiplier: 2, jitter: 0.2 };
const LOCK_TTL_MS = 15_000;
/** Time a stop keeps for freeing the turn and counting what is left, beyond its own timeout's drain. */
const STOP_BOOKKEEPING_MS = 1_000;

class PassTimeoutError extends Error {
  constructor(timeoutMs: number) {
    super(`a lifecycle relay pass took longer than ${timeoutMs} ms; its batch stays in the outbox`);
    this.name = 'PassTimeoutError';
  }
}

type PassResult =
  | { readonly turn: true; readonly published: number }
  | { readonly turn: false; readonly retryAfterMs: number };

/**
 * Hands the lifecycle outbox to the bus, oldest first, one pass at a time across all replicas (a store
 * lock). A pass publishes a batch and only then removes it from the outbox, so every event is published
 * at least once: a pass that fails or dies leaves its batch for the next one, which publishes it again
 * with the same event ids (the key-service settles idempotently, by reservation state). A failed pass
 * frees the turn, so a replica that cannot publish does not keep it from the others. Since a pass always
 * starts from the oldest event, and the bus sends a topic's batches one after another (a retry never
 * overtakes a timed-out send), the events of one reservation reach the bus in outbox order; a repeat may
 * come again after later ones. An entry that does not decode is logged at error level (base64) and
 * removed, never holding up the rest.
 *
 * The lock outlives a pass by construction: a pass that has not finished within a third of the lock's
 * TTL (a publish normally times out long before, at KAFKA_PUBLISH_TIMEOUT, its wait behind an earlier
 * send included) fails, leaving its batch, whatever the bus's own timeout.
 */
export class LifecycleRelay {
  readonly #store: Store;
  readonly #bus: EventBus;
  readonly #logger: Logger;
  readonly #settings: LifecycleRelaySettings;
  readonly #lockTtlMs: number;
  readonly #passTimeoutMs: number;
  #loop: Promise<void> | undefined;
  #stopping = false;
  /** Whether the topic is known to exist: created (when missing) before the first publish, not at start. */
  #topicReady = false;
  #wake: (() => void) | undefined;
  #woken = false;

  constructor(store: Store, bus: EventBus, logger: Logger, settings: LifecycleRelaySettings) {
    this.#store = store;
    this.#bus = bus;
    this.#logger = logger;
    this.#settings = settings;
    this.#lockTtlMs = settings.lockTtlMs ?? LOCK_TTL_MS;
    if (!Number.isInteger(this.#lockTtlMs) || this.#lockTtlMs < 3)
      throw new RangeError(`lockTtlMs must be an integer of at least 3, got ${this.#lockTtlMs}`);
    this.#passTimeoutMs = Math.floor(this.#lockTtlMs / 3);
  }

  start(): void {
    this.#loop ??= this.#run();
  }

  /** Publishes soon: an event was queued. Cuts the lock holder's idle wait short, never a backoff. */
  wake(): void {
    this.#woken = true;
    this.#wake?.();
  }

  /**
   * Stops the loop, then publishes what is left, all within `timeoutMs`, and frees the turn (a second at
   * most beyond it). What is left stays in the outbox for another replica.
   */
  async stop(timeoutMs: number): Promise<void> {
    const deadline = new Deadline(timeoutMs);
    this.#stopping = true;
    this.#wake?.();
    if (this.#loop) await waitAtMost(this.#loop, deadline.remainingMs);
    try {
      while (deadline.remainingMs > 0) {
        let published = 0;
        const passed = this.pass().then((count) => (published = count));
        if (!(await waitAtMost(passed, deadline.remainingMs))) break;
        if (published < this.#settings.batchSize) break;
      }
    } catch (error) {
      this.#logger.warn({ err: error }, 'job lifecycle events left in the outbox for another replica');
    }
    const left = this.#store.queues.length(LIFECYCLE_OUTBOX).then((count) => {
      if (count > 0)
        this.#logger.info({ left: count }, 'job lifecycle events left in the outbox for another replica');
    });
    const released = this.#store.locks.release(RELAY_LOCK, this.#settings.replicaId);
    await waitAtMost(Promise.all([left, released]), STOP_BOOKKEEPING_MS).catch(() => false);
  }

  /** One pass: publishes up to a batch and removes it from the outbox. 0 when empty or not our turn. */
  async pass(): Promise<number> {
    const result = await this.#pass();
    return result.turn ? result.published : 0;
  }

  async #pass(): Promise<PassResult> {
    const { replicaId } = this.#settings;
    const turn = await this.#store.locks.tryAcquire(RELAY_LOCK, replicaId, this.#lockTtlMs);
    if (!turn.acquired) return { turn: false, retryAfterMs: turn.retryAfterMs };
    try {
      let published = 0;
      const work = this.#publishBatch().then((count) => (published = count));
      if (!(await waitAtMost(work, this.#passTimeoutMs))) throw new PassTimeoutError(this.#passTimeoutMs);
      return { turn: true, published };
    } catch (error) {
      // Free the turn: a replica whose passes keep failing must not keep it from the others.
      await this.#store.locks.release(RELAY_LOCK, replicaId).catch(() => false);
      throw error;
    }
  }

  /** Publishes the head of the outbox, then removes it; an entry that does not decode is removed first. */
  async #publishBatch(): Promise<number> {
    const entries = await this.#store.queues.peek(LIFECYCLE_OUTBOX, this.#settings.batchSize);
    if (entries.length === 0) return 0;
    const good: Array<{ readonly entry: QueuedEntry; readonly message: JobLifecycleEvent }> = [];
    const bad: QueuedEntry[] = [];
    for (const entry of entries) {
      const message = decodeLifecycleEvent(entry.payload);
      if (message) good.push({ entry, message });
      else bad.push(entry);
    }
    if (bad.length > 0) {
      for (const entry of bad)
        this.#logger.error(
          { entryId: entry.id, payload: Buffer.from(entry.payload).toString('base64') },
          'job lifecycle outbox entry is not a job lifecycle event: removing it',
        );
      await this.#store.queues.remove(
        LIFECYCLE_OUTBOX,
        bad.map((entry) => entry.id),
      );
    }
    if (good.length > 0) {
      // Here rather than at start-up: a replica started during a broker outage serves (its events wait
      // in the outbox) and creates the topic once the brokers are back.
      if (!this.#topicReady) await this.#bus.ensureTopics([jobLifecycleTopic]);
      this.#topicReady = true;
      await this.#bus.publishBatch(
        jobLifecycleTopic,
        good.map(({ message }) => ({
          message,
          requestId: message.requestId || undefined,
          // The trace of the call it was recorded in, not the relay's (which has none).
          trace: message.traceparent
            ? { traceparent: message.traceparent, tracestate: message.tracestate || undefined }
            : {},
        })),
      );
      await this.#store.queues.remove(
        LIFECYCLE_OUTBOX,
        good.map(({ entry }) => entry.id),
      );
    }
    this.#logger.debug({ published: good.length, removed: bad.length }, 'published job lifecycle events');
    return entries.length;
  }

  async #run(): Promise<void> {
    let failures = 0;
    while (!this.#stopping) {
      let waitMs = this.#settings.pollIntervalMs;
      let wakeable = true;
      this.#woken = false;
      try {
        const result = await this.#pass();
        failures = 0;
        if (!result.turn) {
          // Another replica relays: try for the turn again after a poll interval, whatever is queued here.
          waitMs = Math.min(waitMs, Math.max(result.retryAfterMs, 1));
          wakeable = false;
        } else if (result.published === this.#settings.batchSize) continue;
      } catch (error) {
        failures += 1;
        waitMs = retryDelayMs(this.#settings.retry ?? PASS_RETRY, failures);
        wakeable = false;
        this.#logger.warn(
          { err: error, attempt: failures, retryInMs: waitMs },
          'could not relay job lifecycle events; they stay in the outbox, trying again',
        );
      }
      if (this.#stopping) return;
      if (wakeable && this.#woken) continue;
      await this.#wait(waitMs, wakeable);
    }
  }

  /** Sleeps `ms`, or less when stopping (or woken, if `wakeable`). */
  async #wait(ms: number, wakeable: boolean): Promise<void> {
    const abort = new AbortController();
    this.#wake = () => {
      if (wakeable || this.#stopping) abort.abort();
    };
    // stop() may have come while no wait was there to cut short.
    if (this.#stopping) return;
    try {
      await sleep(ms, undefined, { signal: abort.signal, ref: false });
    } catch {
      // Woken.
    } finally {
      this.#wake = undefined;
    }
  }
}

/**
 * An outbox entry as the event it holds; undefined when it is not one (bytes that do not decode, or an
 * event without its id, reservation or kind).
 */
export function decodeLifecycleEvent(payload: Uint8Array): JobLifecycleEvent | undefined {
  try {
    const message = fromBinary(JobLifecycleEventSchema, payload);
    const complete =
      message.eventId !== '' && message.reservationId !== '' && message.kind !== JobLifecycleKind.UNSPECIFIED;
    return complete ? message : undefined;
  } catch {
    return undefined;
  }
}

/** Events in the outbox, every replica's (read at each scrape). */
export function lifecycleOutboxEvents(store: Store): Promise<number> {
  return store.queues.length(LIFECYCLE_OUTBOX);
}

/** Age of the oldest event in the outbox, by its `occurred_at`; 0 when empty, undefined when unreadable. */
export async function lifecycleOutboxOldestAgeSeconds(
  store: Store,
  now: () => number = Date.now,
): Promise<number | undefined> {
  const [head] = await store.queues.peek(LIFECYCLE_OUTBOX, 1);
  if (!head) return 0;
  const occurredAt = decodeLifecycleEvent(head.payload)?.occurredAt;
  if (!occurredAt) return undefined;
  return Math.max(0, (now() - timestampDate(occurredAt).getTime()) / 1000);
}
