import type { Logger } from '@svc/platform';
import type { PaymentSettlerPort, VerifiedPayment } from './payment-settler-port.js';

/** A verified payment whose nonce the settler holds for one call. */
export interface PaymentReservation {
  readonly payment: VerifiedPayment;
  /**
   * Frees the nonce, so the same `PAYMENT-SIGNATURE` can be sent again: only when the call ended without
   * the debit on chain. Idempotent and never throws: a release that fails is logged, and the reservation
   * lapses at its TTL (V1_PAYMENT_RESERVATION_TTL).
   */
  release(): Promise<void>;
}

export function paymentReservation(
  settler: PaymentSettlerPort,
  payment: VerifiedPayment,
  logger: Logger,
): PaymentReservation {
  let released: Promise<void> | undefined;
  return {
    payment,
    release: () => {
      released ??= settler.release(payment.reservationId).catch((error: unknown) => {
        logger.warn(
          { err: error, reservationId: payment.reservationId, payer: payment.payer },
          'could not release a per-call payment; its nonce stays reserved until its TTL',
        );
      });
      return released;
    },
  };
}
