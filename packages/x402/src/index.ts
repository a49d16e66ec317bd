export { decodeHeader, encodeHeader, networkOf } from './wire.js';
export {
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  PAYMENT_SIGNATURE_HEADER,
  PREPAID_DEBIT,
  X402_VERSION,
  type DebitAuthorizationJson,
  type PaymentPayload,
  type PaymentRefusedResponse,
  type PaymentRequired,
  type PaymentResource,
  type PaymentResponse,
  type PaymentSettledResponse,
  type PrepaidDebitRequirements,
} from '@svc/api';
export {
  chainIdOf,
  paymentRequiredOf,
  paymentResponseOf,
  paymentSignatureFor,
  paymentSignatureForAnswer,
  prepaidDebitRequirementsOf,
  signPayment,
  type PaymentOptions,
} from './client.js';
export {
  debitAuthorizationOf,
  readPaymentSignature,
  sameRequirements,
  type PayloadFormError,
  type ReadPayment,
} from './read-payment.js';
