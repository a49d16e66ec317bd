import { AppError, type ExpiringValues, type RateWindows } from '@svc/platform';

export interface BadKeyLimit {
  readonly limit: number;
  readonly windowMs: number;
}

/**
 * The per-address limit on bad keys, against guessing. Each 401 counts in a sliding window; the call that
 * finds the window full blocks the address until a slot frees. The block is checked before any key is
 * resolved, so a blocked address learns nothing about its guesses (a good one is refused alike) and costs
 * the key-service nothing. Both live in the shared store, so the limit holds over every replica.
 */
export class BadKeyGuard {
  constructor(
    private readonly windows: RateWindows,
    private readonly blocks: ExpiringValues,
    private readonly settings: BadKeyLimit,
  ) {}

  /** Throws 429 `rate_limit_exceeded` while the address is blocked. */
  async assertNotBlocked(address: string): Promise<void> {
    const blockedUntil = await this.blocks.get(this.#blockKey(address));
    if (blockedUntil === null) return;
    throw this.#refusal(Number(blockedUntil) - Date.now());
  }

  /**
   * Counts one bad key of the address and returns what to answer: the 401 itself, or a 429 when this call
   * passed the limit.
   */
  async countBadKey(address: string, unauthorized: AppError): Promise<AppError> {
    const { limit, windowMs } = this.settings;
    const verdict = await this.windows.hit(`gateway:v1:bad-keys:${address}`, limit, windowMs);
    if (verdict.allowed) return unauthorized;
    const blockMs = Math.max(1, verdict.retryAfterMs);
    // Holds the local deadline only to tell later callers how long to wait; the store's TTL ends the block.
    await this.blocks.set(this.#blockKey(address), String(Date.now() + blockMs), blockMs);
    return this.#refusal(blockMs);
  }

  #blockKey(address: string): string {
    return `gateway:v1:bad-keys-blocked:${address}`;
  }

  #refusal(waitMs: number): AppError {
    const { limit, windowMs } = this.settings;
    return new AppError('rate_limit_exceeded', {
      message: `Too many calls with a missing, unknown or revoked API key from this address: at most ${limit} per ${Math.round(windowMs / 1000)} s.`,
      retryAfterSeconds: Math.max(1, waitMs) / 1000,
    });
  }
}
