import {
  encodeHeader,
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  X402_VERSION,
  type PaymentRefusedResponse,
  type PaymentRequired,
  type PaymentResource,
  type PaymentSettledResponse,
  type PrepaidDebitRequirements,
} from '@svc/x402';

// The x402 headers the gateway answers with (docs/protocol.md, Requirements and headers), each base64 of
// its JSON. They travel on the response itself: on a 200 beside `x-service`, on an error as its AppError's
// headers, so every error path renders them the same way.

/** `PAYMENT-REQUIRED`: why the call was not served (`error`, the refusal's code) and how to pay for it. */
export function paymentRequiredHeader(
  error: string,
  resource: PaymentResource,
  accepts: readonly PrepaidDebitRequirements[],
): Record<string, string> {
  const required: PaymentRequired = { x402Version: X402_VERSION, error, resource, accepts };
  return { [PAYMENT_REQUIRED_HEADER]: encodeHeader(required) };
}

/** `PAYMENT-RESPONSE` of a refused payment; `payer` is empty when the payload could not be read. */
export function paymentRefusedHeader(refusal: {
  readonly code: string;
  readonly network: string;
  readonly payer: string | undefined;
}): Record<string, string> {
  const response: PaymentRefusedResponse = {
    success: false,
    errorReason: refusal.code,
    transaction: '',
    network: refusal.network,
    payer: refusal.payer ?? '',
  };
  return { [PAYMENT_RESPONSE_HEADER]: encodeHeader(response) };
}

/** `PAYMENT-RESPONSE` of a settled payment: the settlement transaction is the job's submission. */
export function paymentSettledHeader(settlement: {
  readonly transaction: string;
  readonly network: string;
  readonly payer: string;
  readonly amountWei: bigint;
}): Record<string, string> {
  const response: PaymentSettledResponse = {
    success: true,
    transaction: settlement.transaction,
    network: settlement.network,
    payer: settlement.payer,
    amount: settlement.amountWei.toString(),
  };
  return { [PAYMENT_RESPONSE_HEADER]: encodeHeader(response) };
}
