import type { RateWindowHit, RateWindows, RateWindowVerdict } from '../store.js';
import { requireKey, requirePositiveInteger } from '../validation.js';
import { ExpiringMap, type MemoryContext } from './memory-context.js';

/** Exact sliding log per key (hit times, oldest first); refused hits are not recorded. */
export class MemoryRateWindows implements RateWindows {
  readonly #logs = new ExpiringMap<number[]>();

  constructor(private readonly context: MemoryContext) {}

  async hit(key: string, limit: number, windowMs: number): Promise<RateWindowVerdict> {
    requireRateWindowHit({ key, limit, windowMs });
    this.context.assertOpen('rateWindows.hit');
    return this.hitNow(key, limit, windowMs);
  }

  /** The hit itself, synchronously (so other primitives can make it part of one atomic step). */
  hitNow(key: string, limit: number, windowMs: number): RateWindowVerdict {
    const now = this.context.now();
    const log = (this.#logs.get(key, now) ?? []).filter((at) => at > now - windowMs);
    if (log.length < limit) {
      log.push(now);
      this.#logs.set(key, log, now + windowMs);
      return {
        allowed: true,
        limit,
        remaining: limit - log.length,
        retryAfterMs: 0,
        resetAtMs: now + windowMs,
      };
    }
    const newest = log[log.length - 1] as number;
    this.#logs.set(key, log, newest + windowMs);
    const blocking = log[log.length - limit] as number;
    return {
      allowed: false,
      limit,
      remaining: 0,
      retryAfterMs: blocking + windowMs - now,
      resetAtMs: newest + windowMs,
    };
  }

  sweep(now: number): void {
    this.#logs.sweep(now);
  }
}

export function requireRateWindowHit({ key, limit, windowMs }: RateWindowHit): void {
  requireKey('key', key);
  requirePositiveInteger('limit', limit);
  requirePositiveInteger('windowMs', windowMs);
}
