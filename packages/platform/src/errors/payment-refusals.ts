import type { ApiErrorName } from '@svc/api';
import { PaymentRefusalCode as PaymentRefusalCodeMessage } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';

/**
 * The public codes a per-call payment is refused with, in the protocol's check order (docs/protocol.md,
 * Check order and codes), each with its gRPC `PaymentRefusalCode`: the one mapping between them.
 */
const REFUSALS = {
  invalid_payload: PaymentRefusalCodeMessage.INVALID_PAYLOAD,
  invalid_x402_version: PaymentRefusalCodeMessage.INVALID_X402_VERSION,
  unsupported_scheme: PaymentRefusalCodeMessage.UNSUPPORTED_SCHEME,
  invalid_network: PaymentRefusalCodeMessage.INVALID_NETWORK,
  invalid_payment_requirements: PaymentRefusalCodeMessage.INVALID_PAYMENT_REQUIREMENTS,
  invalid_prepaid_debit_payload_expired: PaymentRefusalCodeMessage.EXPIRED,
  invalid_prepaid_debit_payload_facilitator_mismatch: PaymentRefusalCodeMessage.FACILITATOR_MISMATCH,
  invalid_prepaid_debit_payload_recipient_mismatch: PaymentRefusalCodeMessage.RECIPIENT_MISMATCH,
  invalid_prepaid_debit_facilitator_not_authorized: PaymentRefusalCodeMessage.FACILITATOR_NOT_AUTHORIZED,
  invalid_prepaid_debit_payload_nonce_used: PaymentRefusalCodeMessage.NONCE_USED,
  invalid_prepaid_debit_payload_signature: PaymentRefusalCodeMessage.SIGNATURE_INVALID,
  invalid_prepaid_debit_payload_over_cap: PaymentRefusalCodeMessage.OVER_CAP,
  insufficient_funds: PaymentRefusalCodeMessage.INSUFFICIENT_FUNDS,
  invalid_transaction_state: PaymentRefusalCodeMessage.TRANSACTION_STATE,
} as const satisfies Partial<Record<ApiErrorName, PaymentRefusalCodeMessage>>;

export type PaymentRefusalCode = keyof typeof REFUSALS;

/** Every refusal code, in check order. */
export const PAYMENT_REFUSAL_CODES = Object.keys(REFUSALS) as PaymentRefusalCode[];

export function isPaymentRefusalCode(code: string): code is PaymentRefusalCode {
  return Object.hasOwn(REFUSALS, code);
}

/** The gRPC enum value of a refusal code. */
export function paymentRefusalToProto(code: PaymentRefusalCode): PaymentRefusalCodeMessage {
  return REFUSALS[code];
}

/** The refusal code of a gRPC enum value; undefined for UNSPECIFIED or a value this build does not know. */
export function paymentRefusalFromProto(value: PaymentRefusalCodeMessage): PaymentRefusalCode | undefined {
  return PAYMENT_REFUSAL_CODES.find((code) => REFUSALS[code] === value);
}
