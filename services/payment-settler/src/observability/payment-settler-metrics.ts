import { isAppError } from '@svc/platform';
import { Counter, Histogram, Registry } from 'prom-client';

/**
 * The payment-settler's Prometheus metrics, on the registry given (the process's, which the runner
 * serves; no global state) or one of their own. Names start with `svc_payment_settler_`: in the
 * all-in-one process every service shares one registry.
 */
export class PaymentSettlerMetrics {
  readonly #verifications: Counter<'outcome' | 'code'>;
  readonly #settlements: Counter<'outcome' | 'code'>;
  readonly #settleSeconds: Histogram<'outcome'>;

  constructor(readonly registry: Registry = new Registry()) {
    const registers = [registry];
    this.#verifications = new Counter({
      name: 'svc_payment_settler_verifications_total',
      help: 'x402 payments verified (VerifyPayment), by outcome: verified, refused with its refusal code, or error with its API error code (the chain could not be read).',
      labelNames: ['outcome', 'code'],
      registers,
    });
    this.#settlements = new Counter({
      name: 'svc_payment_settler_settlements_total',
      help: 'x402 settlements (SettlePayment), by outcome: settled, refused with its refusal code, session_unusable (another session is tried), in_flight (asked while a settlement of the payment is under way: one answered at broadcast and not mined yet, say), or error with its API error code (blob_fee_too_high, unexpected_settle_error: the payment may have landed). A settlement answered at broadcast counts once, by how its send ended.',
      labelNames: ['outcome', 'code'],
      registers,
    });
    this.#settleSeconds = new Histogram({
      name: 'svc_payment_settler_settle_seconds',
      help: 'Time to settle a payment, the blob transaction mined (or refused), by outcome; answered at broadcast or not.',
      labelNames: ['outcome'],
      buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120],
      registers,
    });
  }

  /** A payment verified, or refused with its code. */
  verified(refusalCode?: string): void {
    if (refusalCode === undefined) this.#verifications.inc({ outcome: 'verified' });
    else this.#verifications.inc({ outcome: 'refused', code: refusalCode });
  }

  verifyFailed(error: unknown): void {
    this.#verifications.inc({ outcome: 'error', code: errorCodeOf(error) });
  }

  /** A settlement's outcome (settled, refused with its code, session_unusable, in_flight) and how long it took. */
  settled(
    outcome: 'settled' | 'refused' | 'session_unusable' | 'in_flight',
    seconds: number,
    refusalCode?: string,
  ): void {
    this.#settled(outcome, seconds, refusalCode);
  }

  settleFailed(error: unknown, seconds: number): void {
    this.#settled('error', seconds, errorCodeOf(error));
  }

  #settled(outcome: string, seconds: number, code?: string): void {
    this.#settlements.inc(code === undefined ? { outcome } : { outcome, code });
    this.#settleSeconds.observe({ outcome }, seconds);
  }
}

/** An AppError's code; anything else is a bug the caller hears as `internal`. */
function errorCodeOf(error: unknown): string {
  return isAppError(error) ? error.code : 'internal';
}
