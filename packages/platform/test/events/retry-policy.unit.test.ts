import { describe, expect, it } from '@jest/globals';
import { DEFAULT_RETRY_POLICY, retryDelayMs } from '../../src/events/index.js';
import { resolveRetryPolicy } from '../../src/events/retry-policy.js';

describe('handler retry policy', () => {
  const policy = resolveRetryPolicy({ initialDelayMs: 100, maxDelayMs: 1_000, multiplier: 2, jitter: 0.5 });
  const noJitter = (): number => 0;

  it('doubles the wait after each failure up to the bound', () => {
    const waits = [1, 2, 3, 4, 5, 6, 50].map((attempt) => retryDelayMs(policy, attempt, noJitter));
    expect(waits).toEqual([100, 200, 400, 800, 1_000, 1_000, 1_000]);
  });

  it('takes at most the jitter fraction off a wait', () => {
    expect(retryDelayMs(policy, 4, () => 0.999_999)).toBe(400);
    expect(retryDelayMs(policy, 50, () => 0.5)).toBe(750);
    for (let attempt = 1; attempt < 40; attempt += 1) {
      const wait = retryDelayMs(policy, attempt);
      expect(wait).toBeGreaterThanOrEqual(50);
      expect(wait).toBeLessThanOrEqual(1_000);
    }
  });

  it('defaults to a bounded backoff and rejects nonsense', () => {
    expect(resolveRetryPolicy()).toEqual(DEFAULT_RETRY_POLICY);
    expect(retryDelayMs(DEFAULT_RETRY_POLICY, 1_000, noJitter)).toBe(DEFAULT_RETRY_POLICY.maxDelayMs);
    expect(() => resolveRetryPolicy({ multiplier: 0.5 })).toThrow(RangeError);
    expect(() => resolveRetryPolicy({ jitter: 2 })).toThrow(RangeError);
    expect(() => resolveRetryPolicy({ initialDelayMs: -1 })).toThrow(RangeError);
  });
});
