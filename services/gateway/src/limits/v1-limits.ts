import type { Logger, Store } from '@svc/platform';
import type { LimitHitReporter } from '../v1/limit-hit-reporter.js';
import { BadCredentialGuard } from './bad-credential-guard.js';
import { CallSlots } from './call-slots.js';
import type { KeyRateLimit } from './key-rate-limit.js';
import { PayerLimits } from './payer-limits.js';

/** The `/v1` limits' settings (docs/api.md, Limits), from the gateway's configuration. */
export interface V1LimitSettings {
  readonly keyRateLimit: number;
  readonly keyRateWindowMs: number;
  readonly keyConcurrencyLimit: number;
  readonly concurrencyLeaseTtlMs: number;
  readonly badKeyRateLimit: number;
  readonly badKeyRateWindowMs: number;
  readonly payerRateLimit: number;
  readonly payerRateWindowMs: number;
  readonly payerConcurrencyLimit: number;
  readonly keylessRateLimit: number;
  readonly keylessRateWindowMs: number;
}

/** Every limit of `/v1`, each held in the shared store so it holds over every replica. */
export interface V1Limits {
  /** Presented API keys that fail, per client network (`V1_BAD_KEY_RATE_LIMIT`). */
  readonly badKeys: BadCredentialGuard;
  /** Calls per API key (`V1_KEY_RATE_LIMIT`), counted with the key's revocation check (authenticateApiKey). */
  readonly keyRate: KeyRateLimit;
  /** Completions in flight per API key (`V1_KEY_CONCURRENCY_LIMIT`). */
  readonly keySlots: CallSlots;
  /**
   * Calls and calls in flight per payer of keyless per-call payments (`V1_PAYER_*`), and keyless calls per
   * client address (`V1_KEYLESS_RATE_LIMIT`).
   */
  readonly payerLimits: PayerLimits;
}

/** The `/v1` limits; an API key's refusals are counted in its `limitHits` through `limitHits`. */
export function v1Limits(
  store: Store,
  settings: V1LimitSettings,
  limitHits: LimitHitReporter,
  logger: Logger,
): V1Limits {
  const leaseTtlMs = settings.concurrencyLeaseTtlMs;
  return {
    badKeys: new BadCredentialGuard(store.rateWindows, {
      name: 'v1:bad-keys',
      limit: settings.badKeyRateLimit,
      windowMs: settings.badKeyRateWindowMs,
      refusal: 'Too many calls with an unknown or revoked API key from this address',
    }),
    keyRate: {
      limit: settings.keyRateLimit,
      windowMs: settings.keyRateWindowMs,
      onRefused: (keyId) => limitHits.report(keyId, 'rate'),
    },
    keySlots: new CallSlots(
      store.concurrency,
      {
        holder: 'key',
        limit: settings.keyConcurrencyLimit,
        leaseTtlMs,
        onRefused: (keyId) => limitHits.report(keyId, 'concurrency'),
      },
      logger,
    ),
    payerLimits: new PayerLimits(
      store.rateWindows,
      { limit: settings.payerRateLimit, windowMs: settings.payerRateWindowMs },
      // Slots of their own (naming the payer as holder), apart from the keys'.
      new CallSlots(
        store.concurrency,
        { holder: 'payer', limit: settings.payerConcurrencyLimit, leaseTtlMs },
        logger,
      ),
      { limit: settings.keylessRateLimit, windowMs: settings.keylessRateWindowMs },
    ),
  };
}
