import { readPaymentPayload, type ReadPayment } from '@svc/api/schemas';
import { decodeHeader } from './wire.js';
import { isRecord, type DebitAuthorizationJson, type PrepaidDebitRequirements } from '@svc/api';

export type { PayloadFormError, ReadPayment } from '@svc/api';

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * Reads a `PAYMENT-SIGNATURE` in the protocol's check order (docs/protocol.md, Check order and codes): a
 * header that is not base64 of a JSON object is `invalid_payload`; its JSON is then read by `@svc/api`'s
 * `paymentPayloadSchema` (`invalid_payload` for a field missing or ill-formed, `invalid_x402_version` and
 * `unsupported_scheme` for a well-formed version or scheme not taken here).
 */
export function readPaymentSignature(header: string): ReadPayment {
  return readPaymentPayload(decodeHeader(header));
}

/** The authorization as the contract takes it. */
export function debitAuthorizationOf(authorization: DebitAuthorizationJson) {
  return {
    payer: authorization.payer,
    payTo: authorization.payTo,
    facilitator: authorization.facilitator,
    maxAmount: BigInt(authorization.maxAmount),
    deadline: BigInt(authorization.deadline),
    nonce: authorization.nonce,
  };
}

/**
 * Whether `accepted` is `current` in every field. Addresses compare without regard to checksum case; all
 * else exactly, and an extra field in either makes them differ.
 */
export function sameRequirements(
  accepted: PrepaidDebitRequirements,
  current: PrepaidDebitRequirements,
): boolean {
  return canonical(accepted) === canonical(current);
}

function canonical(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(ADDRESS.test(value) ? value.toLowerCase() : value);
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isRecord(value))
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}
