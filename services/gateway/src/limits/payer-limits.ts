import type { RateWindows } from '@svc/platform';
import type { Response } from 'express';
import type { CallSlot, CallSlots } from './call-slots.js';
import { rateLimitRefusal, rateWindowKey } from './rate-limit.js';

export interface PayerRateLimit {
  readonly limit: number;
  readonly windowMs: number;
}

/**
 * The per-payer limits of calls paid per call with no API key: calls per window, then calls in flight. They
 * are taken after the payment verified (its payer is known only then) and before anything is settled, so a
 * refused call costs the payer nothing and its payment can be sent again. Both live in the shared store, so
 * they hold over every replica; a payer is counted by its address in lowercase.
 */
export class PayerLimits {
  constructor(
    private readonly windows: RateWindows,
    private readonly rate: PayerRateLimit,
    /** Slots of their own (settings naming the payer as holder), apart from the keys'. */
    private readonly slots: CallSlots,
    /** Keyless calls per client address, counted before the payment-settler is asked anything. */
    private readonly perAddress: PayerRateLimit,
  ) {}

  /**
   * Counts a call that carries no API key in its client address's window, before the settler states the
   * requirements or verifies a payment (each costs it chain reads), or throws the 429. The payer is not
   * known yet, so the address is the only subject; a call with an API key is never counted here.
   */
  async countKeyless(network: string, res: Response): Promise<void> {
    const { limit, windowMs } = this.perAddress;
    const verdict = await this.windows.hit(rateWindowKey('v1:keyless', network), limit, windowMs);
    const refusal = rateLimitRefusal(res, verdict, {
      limit,
      windowMs,
      refusal: 'Too many calls without an API key from this address',
    });
    if (refusal !== undefined) throw refusal;
  }

  /** Counts the call in the payer's rate window and takes an in-flight slot, or throws the 429. */
  async take(payer: string, res: Response): Promise<CallSlot> {
    const subject = payer.toLowerCase();
    const { limit, windowMs } = this.rate;
    const verdict = await this.windows.hit(rateWindowKey('v1:payer-rate', subject), limit, windowMs);
    const refusal = rateLimitRefusal(res, verdict, {
      limit,
      windowMs,
      refusal: 'Too many calls paid by this payer',
    });
    if (refusal !== undefined) throw refusal;
    // Key ids are UUIDs, so `payer:` keeps the payers' slots apart from the keys'.
    return this.slots.acquire(`payer:${subject}`);
  }
}
