import { AppError, type RateWindowHit, type RateWindows, type RateWindowVerdict } from '@svc/platform';

export interface BadKeyLimit {
  readonly limit: number;
  readonly windowMs: number;
}

/**
 * The per-address limit on bad keys, against guessing. Only a credential that was presented and failed
 * counts: a call with no credential at all costs nothing to answer and can be sent by any web page
 * cross-origin, so counting it would let a page lock its visitors' addresses out. The limit is consulted
 * only after the key failed, so a good key is served whatever its address did (behind a shared or
 * untrusted proxy, one client's guesses must not lock everyone out). The window lives in the shared
 * store, so the limit holds over every replica.
 */
export class BadKeyGuard {
  constructor(
    private readonly windows: RateWindows,
    private readonly settings: BadKeyLimit,
  ) {}

  /** The window of the client's network, for a store operation that counts a failed key there itself. */
  window(network: string): RateWindowHit {
    const { limit, windowMs } = this.settings;
    return { key: `gateway:v1:bad-keys:${network}`, limit, windowMs };
  }

  /**
   * Counts one failed key from the client's network and returns what to answer: the 401 itself, or a 429
   * once the network passed the limit in the window.
   */
  async refusal(network: string, unauthorized: AppError): Promise<AppError> {
    const { key, limit, windowMs } = this.window(network);
    return this.answer(await this.windows.hit(key, limit, windowMs), unauthorized);
  }

  /** What to answer a failed key once it was counted in the network's window with this verdict. */
  answer(verdict: RateWindowVerdict, unauthorized: AppError): AppError {
    if (verdict.allowed) return unauthorized;
    const { limit, windowMs } = this.settings;
    return new AppError('rate_limit_exceeded', {
      message: `Too many calls with an unknown or revoked API key from this address: at most ${limit} per ${Math.round(windowMs / 1000)} s.`,
      retryAfterSeconds: Math.max(1, verdict.retryAfterMs) / 1000,
    });
  }
}
