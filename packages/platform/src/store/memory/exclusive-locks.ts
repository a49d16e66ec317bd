import type { ExclusiveLocks, LockAttempt } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import { ExpiringMap, type MemoryContext } from './memory-context.js';

/** Lock key → owner id, lapsing at its TTL. */
export class MemoryExclusiveLocks implements ExclusiveLocks {
  readonly #owners = new ExpiringMap<string>();

  constructor(private readonly context: MemoryContext) {}

  async tryAcquire(key: string, ownerId: string, ttlMs: number): Promise<LockAttempt> {
    requireKey('key', key);
    requireKey('ownerId', ownerId);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('locks.tryAcquire');
    const now = this.context.now();
    const held = this.#owners.entry(key, now);
    if (held === undefined || held.value === ownerId) {
      this.#owners.set(key, ownerId, now + ttlMs);
      return { acquired: true, expiresAtMs: now + ttlMs };
    }
    const retryAfterMs = held.expiresAtMs === null ? 1 : Math.max(1, held.expiresAtMs - now);
    return { acquired: false, holderId: held.value, retryAfterMs };
  }

  async renew(key: string, ownerId: string, ttlMs: number): Promise<boolean> {
    requireKey('key', key);
    requireKey('ownerId', ownerId);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('locks.renew');
    const now = this.context.now();
    if (this.#owners.get(key, now) !== ownerId) return false;
    this.#owners.set(key, ownerId, now + ttlMs);
    return true;
  }

  async release(key: string, ownerId: string): Promise<boolean> {
    requireKey('key', key);
    requireKey('ownerId', ownerId);
    this.context.assertOpen('locks.release');
    if (this.#owners.get(key, this.context.now()) !== ownerId) return false;
    return this.#owners.delete(key);
  }

  async holder(key: string): Promise<string | null> {
    requireKey('key', key);
    this.context.assertOpen('locks.holder');
    return this.#owners.get(key, this.context.now()) ?? null;
  }

  sweep(now: number): void {
    this.#owners.sweep(now);
  }
}
