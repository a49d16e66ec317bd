import { randomUUID } from 'node:crypto';
import type { ConcurrencyLeases, LeaseOutcome } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import { ExpiringMap, type MemoryContext } from './memory-context.js';

/** Per key, lease id → expiry; the key lapses with its last lease. */
export class MemoryConcurrencyLeases implements ConcurrencyLeases {
  readonly #leases = new ExpiringMap<Map<string, number>>();

  constructor(private readonly context: MemoryContext) {}

  async acquire(key: string, limit: number, ttlMs: number): Promise<LeaseOutcome> {
    requireKey('key', key);
    requirePositiveInteger('limit', limit);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('concurrency.acquire');
    const now = this.context.now();
    const leases = this.#liveLeases(key, now);
    if (leases.size < limit) {
      const leaseId = randomUUID();
      const expiresAtMs = now + ttlMs;
      leases.set(leaseId, expiresAtMs);
      this.#store(key, leases);
      return { granted: true, leaseId, active: leases.size, expiresAtMs };
    }
    const expiries = [...leases.values()].sort((a, b) => a - b);
    const blocking = expiries[leases.size - limit] as number;
    return { granted: false, active: leases.size, retryAfterMs: blocking - now };
  }

  async renew(key: string, leaseId: string, ttlMs: number): Promise<boolean> {
    requireKey('key', key);
    requireKey('leaseId', leaseId);
    requirePositiveInteger('ttlMs', ttlMs);
    this.context.assertOpen('concurrency.renew');
    const now = this.context.now();
    const leases = this.#liveLeases(key, now);
    if (!leases.has(leaseId)) return false;
    leases.set(leaseId, now + ttlMs);
    this.#store(key, leases);
    return true;
  }

  async release(key: string, leaseId: string): Promise<boolean> {
    requireKey('key', key);
    requireKey('leaseId', leaseId);
    this.context.assertOpen('concurrency.release');
    const leases = this.#liveLeases(key, this.context.now());
    const wasLive = leases.delete(leaseId);
    this.#store(key, leases);
    return wasLive;
  }

  async count(key: string): Promise<number> {
    requireKey('key', key);
    this.context.assertOpen('concurrency.count');
    return this.#liveLeases(key, this.context.now()).size;
  }

  sweep(now: number): void {
    this.#leases.sweep(now);
  }

  #liveLeases(key: string, now: number): Map<string, number> {
    const leases = this.#leases.get(key, now) ?? new Map<string, number>();
    for (const [leaseId, expiresAtMs] of leases) {
      if (expiresAtMs <= now) leases.delete(leaseId);
    }
    return leases;
  }

  #store(key: string, leases: Map<string, number>): void {
    if (leases.size === 0) {
      this.#leases.delete(key);
      return;
    }
    this.#leases.set(key, leases, Math.max(...leases.values()));
  }
}
