import type { PaymentRefusalCode } from '@svc/platform';
import type { PaymentResource, PrepaidDebitRequirements } from '@svc/x402';

// The port `/v1` takes per-call payments (x402 version 2, scheme `prepaid-debit`) through. The
// payment-settler (over gRPC) is its real implementation; a gateway configured with none takes no per-call
// payments. The gateway only states, verifies and releases payments: the job-orchestrator settles them.

/** What a per-call payment for a call must look like: the one `accepts` entry and the paid resource. */
export interface PaymentOffer {
  readonly requirements: PrepaidDebitRequirements;
  readonly resource: PaymentResource;
}

/** A payment that passed every check; its nonce is reserved for this call until settled or released. */
export interface VerifiedPayment {
  /** The nonce reservation, settled by the job-orchestrator or released by the gateway. */
  readonly reservationId: string;
  /** The wallet the payment debits. */
  readonly payer: string;
  readonly nonce: string;
  /** The fee settlement will debit (the requirements' `amount`). */
  readonly amountWei: bigint;
  /** CAIP-2, `eip155:<chainId>`, for `PAYMENT-RESPONSE`. */
  readonly network: string;
}

/** A payment that cannot settle; nothing is reserved. */
export interface PaymentRefusal {
  readonly code: PaymentRefusalCode;
  /** Safe to show to the caller. */
  readonly message: string;
  /** Present when the payload could be decoded. */
  readonly payer?: string;
  /** The current `accepts` entry, to rebuild `PAYMENT-REQUIRED` from. */
  readonly currentRequirements?: PrepaidDebitRequirements;
}

/** VerifyPaymentResponse's `outcome`, as its oneof is named. */
export type PaymentVerdict =
  | { readonly case: 'verified'; readonly value: VerifiedPayment }
  | { readonly case: 'refused'; readonly value: PaymentRefusal };

export interface PaymentSettlerPort {
  /** The current `prepaid-debit` entry for a model; throws `model_not_found` for an unknown one. */
  requirements(model: string, resourceUrl: string): Promise<PaymentOffer>;
  /**
   * Checks a `PAYMENT-SIGNATURE` (the header as received) in the protocol's order and, when it is good,
   * reserves its nonce. A chain that cannot be read is thrown (`unexpected_verify_error`), not refused.
   */
  verify(
    paymentSignature: string,
    model: string,
    resourceUrl: string,
    requestId: string,
  ): Promise<PaymentVerdict>;
  /** Frees a reservation whose call ended without the debit on chain; a no-op for a settled one. */
  release(reservationId: string): Promise<void>;
}
