import type { RateWindows } from '@svc/platform';
import type { RequestHandler } from 'express';
import { signedInWallet } from '../api/wallet-sign-in.js';
import { clientNetwork } from '../http/client-address.js';
import { BadCredentialGuard } from './bad-credential-guard.js';
import { rateLimited } from './rate-limit.js';

/** The `/api` limits' settings (docs/api.md, Limits), from the gateway's configuration. */
export interface ApiLimitSettings {
  readonly keyRoutesRateLimit: number;
  readonly keyRoutesRateWindowMs: number;
  readonly badTokenRateLimit: number;
  readonly badTokenRateWindowMs: number;
  readonly signInRateLimit: number;
  readonly signInRateWindowMs: number;
}

/** Every limit of `/api`, each a window in the shared store so it holds over every replica. */
export interface ApiLimits {
  /** Sign-in calls (challenge and verify together) per client network (`SIGN_IN_RATE_LIMIT`). */
  readonly signIn: RequestHandler;
  /**
   * `GET /api/chain` per client network, in a window of its own: loading the console must not spend the
   * address's sign-in budget.
   */
  readonly chain: RequestHandler;
  /** Presented sign-in tokens that fail, per client network (`API_BAD_TOKEN_RATE_LIMIT`). */
  readonly badTokens: BadCredentialGuard;
  /** Key management calls per signed-in wallet (`KEY_ROUTES_RATE_LIMIT`); mounted after the sign-in check. */
  readonly keyRoutes: RequestHandler;
}

export function apiLimits(rateWindows: RateWindows, settings: ApiLimitSettings): ApiLimits {
  return {
    signIn: rateLimited(rateWindows, {
      name: 'sign-in:ip',
      limit: settings.signInRateLimit,
      windowMs: settings.signInRateWindowMs,
      subject: clientNetwork,
      refusal: 'Too many sign-in calls from this address',
    }),
    chain: rateLimited(rateWindows, {
      name: 'chain:ip',
      limit: settings.signInRateLimit,
      windowMs: settings.signInRateWindowMs,
      subject: clientNetwork,
      refusal: 'Too many chain lookups from this address',
    }),
    badTokens: new BadCredentialGuard(rateWindows, {
      name: 'api:bad-tokens',
      limit: settings.badTokenRateLimit,
      windowMs: settings.badTokenRateWindowMs,
      refusal: 'Too many calls with an invalid or expired sign-in token from this address',
    }),
    keyRoutes: rateLimited(rateWindows, {
      name: 'api-keys:wallet',
      limit: settings.keyRoutesRateLimit,
      windowMs: settings.keyRoutesRateWindowMs,
      subject: (_req, res) => signedInWallet(res).toLowerCase(),
      refusal: 'Too many key management calls for this wallet',
    }),
  };
}
