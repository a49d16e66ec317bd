import type { AppError, RateWindowHit, RateWindowVerdict } from '@svc/platform';
import type { Response } from 'express';
import { rateLimitRefusal, rateWindowKey } from './rate-limit.js';

/** The per-key rate limit on `/v1` calls: a sliding window per API key in the shared store. */
export interface KeyRateLimit {
  readonly limit: number;
  readonly windowMs: number;
  /**
   * Told of each refusal (to count it in the key's `limitHits`); the refusal is answered once it settles, so
   * a listing asked for next shows it. Must not throw or reject.
   */
  onRefused(keyId: string): Promise<void> | void;
}

const REFUSAL = 'Too many calls with this API key';

/**
 * The key's rate window, for the store operation that reads the key's revocation marker and counts the call
 * here in one round trip when the key is not revoked (see authenticateApiKey). The key id is its hash tag,
 * the tag of the key's revocation marker, so on a Redis Cluster both are in one slot and that stays one script.
 */
export function keyRateWindow(keyRate: KeyRateLimit, keyId: string): RateWindowHit {
  return { key: rateWindowKey('v1:key', `{${keyId}}`), limit: keyRate.limit, windowMs: keyRate.windowMs };
}

/**
 * Puts the key window's verdict on the response and, when it refused, counts the refusal in the key's
 * `limitHits` and returns the 429 `rate_limit_exceeded` to answer; else undefined.
 */
export async function keyRateRefusal(
  res: Response,
  verdict: RateWindowVerdict,
  keyRate: KeyRateLimit,
  keyId: string,
): Promise<AppError | undefined> {
  const refusal = rateLimitRefusal(res, verdict, { ...keyRate, refusal: REFUSAL });
  if (refusal !== undefined) await keyRate.onRefused(keyId);
  return refusal;
}
