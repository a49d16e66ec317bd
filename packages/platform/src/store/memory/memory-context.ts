import { StoreClosedError } from '../errors.js';
import type { EpochMs } from '../store.js';

/** What every in-memory primitive shares: the store's clock and whether the store is still open. */
export interface MemoryContext {
  now(): EpochMs;
  assertOpen(operation: string): void;
}

export class MemoryLifecycle implements MemoryContext {
  #closed = false;

  constructor(private readonly clock: () => EpochMs) {}

  now(): EpochMs {
    return this.clock();
  }

  get closed(): boolean {
    return this.#closed;
  }

  close(): void {
    this.#closed = true;
  }

  assertOpen(operation: string): void {
    if (this.#closed) throw new StoreClosedError(operation);
  }
}

interface ExpiringEntry<V> {
  value: V;
  expiresAtMs: EpochMs | null;
}

/** A map whose entries lapse at their expiry, like Redis keys: lazily on access, and on `sweep`. */
export class ExpiringMap<V> {
  readonly #entries = new Map<string, ExpiringEntry<V>>();

  get(key: string, now: EpochMs): V | undefined {
    return this.entry(key, now)?.value;
  }

  entry(key: string, now: EpochMs): Readonly<ExpiringEntry<V>> | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry;
  }

  set(key: string, value: V, expiresAtMs: EpochMs | null): void {
    this.#entries.set(key, { value, expiresAtMs });
  }

  delete(key: string): boolean {
    return this.#entries.delete(key);
  }

  sweep(now: EpochMs): void {
    for (const [key, entry] of this.#entries) {
      if (entry.expiresAtMs !== null && entry.expiresAtMs <= now) this.#entries.delete(key);
    }
  }
}
