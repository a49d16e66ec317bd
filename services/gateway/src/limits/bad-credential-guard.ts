import { AppError, type RateWindowHit, type RateWindows, type RateWindowVerdict } from '@svc/platform';
import { rateWindowKey } from './rate-limit.js';

/** A per-address limit on presented credentials that fail. */
export interface BadCredentialLimit {
  /** Names the window in store keys (`gateway:<name>:<network>`), so two guards never share one. */
  readonly name: string;
  readonly limit: number;
  readonly windowMs: number;
  /** What the 429 says, e.g. "Too many calls with an unknown or revoked API key from this address". */
  readonly refusal: string;
}

/**
 * The per-address limit on credentials that fail (bad API keys on `/v1`, bad sign-in tokens on `/api`),
 * against guessing. Only a credential that was presented and failed counts: a call with no credential at
 * all costs nothing to answer and can be sent by any web page cross-origin, so counting it would let a page
 * lock its visitors' addresses out. The limit is consulted only after the credential failed, so a good one
 * is served whatever its address did (behind a shared or untrusted proxy, one client's guesses must not
 * lock everyone out). The address is the client's network (`clientNetwork`: an IPv6 client by its /64). The
 * window lives in the shared store, so the limit holds over every replica.
 */
export class BadCredentialGuard {
  constructor(
    private readonly windows: RateWindows,
    private readonly settings: BadCredentialLimit,
  ) {}

  /** The window of the client's network, for a store operation that counts a failed credential there itself. */
  window(network: string): RateWindowHit {
    const { name, limit, windowMs } = this.settings;
    return { key: rateWindowKey(name, network), limit, windowMs };
  }

  /**
   * Counts one failed credential from the client's network and returns what to answer: the 401 itself, or
   * a 429 once the network passed the limit in the window.
   */
  async refusal(network: string, unauthorized: AppError): Promise<AppError> {
    const { key, limit, windowMs } = this.window(network);
    return this.answer(await this.windows.hit(key, limit, windowMs), unauthorized);
  }

  /** What to answer a failed credential once it was counted in the network's window with this verdict. */
  answer(verdict: RateWindowVerdict, unauthorized: AppError): AppError {
    if (verdict.allowed) return unauthorized;
    const { limit, windowMs, refusal } = this.settings;
    return new AppError('rate_limit_exceeded', {
      message: `${refusal}: at most ${limit} per ${Math.round(windowMs / 1000)} s.`,
      retryAfterSeconds: Math.max(1, verdict.retryAfterMs) / 1000,
    });
  }
}
