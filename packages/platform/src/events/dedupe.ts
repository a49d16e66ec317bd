import type { EventHandler } from './event-bus.js';

/**
 * The ids of events a consumer has handled. Scope one store to one consumer group (a Redis key prefix
 * per group, say): two groups handle the same event independently.
 */
export interface ProcessedEventIds {
  /** Records the id atomically; true only for the first caller with that id. */
  firstSeen(eventId: string): Promise<boolean>;
  /** Drops an id whose handling failed, so the bus's retry of that event is handled again. */
  forget(eventId: string): Promise<void>;
}

/**
 * Wraps a handler so an event id handled once is acknowledged without running it again (the bus
 * delivers at-least-once; Kafka redelivers after a crash or a rebalance).
 *
 * The id is recorded before the handler runs, so a concurrent duplicate is skipped rather than run
 * twice. A process that dies mid-handler leaves the id recorded and the event unhandled: for an effect
 * that must happen exactly once, make the effect itself idempotent (a unique key in the same database
 * transaction) instead of relying on this helper alone.
 */
export function dedupeByEventId<M>(processed: ProcessedEventIds, handler: EventHandler<M>): EventHandler<M> {
  return async (event) => {
    if (!(await processed.firstSeen(event.eventId))) return;
    try {
      await handler(event);
    } catch (error) {
      await processed.forget(event.eventId);
      throw error;
    }
  };
}

/** In-process ProcessedEventIds for the all-in-one mode and tests; forgets the oldest ids beyond `capacity`. */
export class InMemoryProcessedEventIds implements ProcessedEventIds {
  // A Set iterates in insertion order, so its first entry is the oldest id.
  readonly #ids = new Set<string>();
  readonly #capacity: number;

  constructor(options: { capacity?: number } = {}) {
    this.#capacity = options.capacity ?? 100_000;
    if (!Number.isInteger(this.#capacity) || this.#capacity < 1) {
      throw new RangeError(`capacity must be a positive integer, got ${this.#capacity}`);
    }
  }

  async firstSeen(eventId: string): Promise<boolean> {
    if (this.#ids.has(eventId)) return false;
    this.#ids.add(eventId);
    if (this.#ids.size > this.#capacity) {
      const oldest = this.#ids.values().next().value;
      if (oldest !== undefined) this.#ids.delete(oldest);
    }
    return true;
  }

  async forget(eventId: string): Promise<void> {
    this.#ids.delete(eventId);
  }
}
