import {
  decodeHeader,
  PREPAID_DEBIT,
  X402_VERSION,
  type DebitAuthorizationJson,
  type PaymentPayload,
  type PrepaidDebitRequirements,
} from './wire.js';

/** The refusals a `PAYMENT-SIGNATURE` can earn from its form alone, before anything is read on chain. */
export type PayloadFormError = 'invalid_payload' | 'invalid_x402_version' | 'unsupported_scheme';

export type ReadPayment =
  | { readonly ok: true; readonly payment: PaymentPayload }
  | { readonly ok: false; readonly code: PayloadFormError; readonly message: string };

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const BYTES32 = /^0x[0-9a-fA-F]{64}$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
const UINT256 = /^(0|[1-9][0-9]{0,77})$/;

/**
 * Reads a `PAYMENT-SIGNATURE` in the protocol's check order (docs/protocol.md): not base64 JSON →
 * `invalid_payload`; a version other than 2 → `invalid_x402_version`; a scheme other than
 * `prepaid-debit` → `unsupported_scheme`; then any field of the prepaid-debit form that is missing or
 * ill-formed → `invalid_payload`. The checks against the current requirements and the chain come after.
 */
export function readPaymentSignature(header: string): ReadPayment {
  const decoded = decodeHeader(header);
  if (!isObject(decoded))
    return refuse('invalid_payload', 'PAYMENT-SIGNATURE must be base64 of a JSON object.');
  if (decoded.x402Version !== X402_VERSION)
    return refuse(
      'invalid_x402_version',
      `Unsupported x402 version ${JSON.stringify(decoded.x402Version ?? null)}; this server speaks version ${X402_VERSION}.`,
    );
  const accepted = decoded.accepted;
  if (!isObject(accepted) || typeof accepted.scheme !== 'string')
    return refuse('invalid_payload', 'PAYMENT-SIGNATURE has no accepted.scheme.');
  if (accepted.scheme !== PREPAID_DEBIT)
    return refuse(
      'unsupported_scheme',
      `Scheme ${accepted.scheme} is not taken here; pay with ${PREPAID_DEBIT}.`,
    );
  const problem = requirementsProblem(accepted) ?? payloadProblem(decoded.payload);
  if (problem) return refuse('invalid_payload', `PAYMENT-SIGNATURE is malformed: ${problem}.`);
  return { ok: true, payment: decoded as unknown as PaymentPayload };
}

function requirementsProblem(accepted: Record<string, unknown>): string | undefined {
  if (typeof accepted.network !== 'string') return 'accepted.network is not a string';
  if (typeof accepted.amount !== 'string' || !UINT256.test(accepted.amount))
    return 'accepted.amount is not a decimal amount';
  if (!isAddress(accepted.asset)) return 'accepted.asset is not an address';
  if (!isAddress(accepted.payTo)) return 'accepted.payTo is not an address';
  if (!Number.isSafeInteger(accepted.maxTimeoutSeconds))
    return 'accepted.maxTimeoutSeconds is not an integer';
  const extra = accepted.extra;
  if (!isObject(extra)) return 'accepted.extra is not an object';
  if (typeof extra.name !== 'string' || typeof extra.version !== 'string')
    return 'accepted.extra needs name and version';
  if (!isAddress(extra.facilitatorAddress)) return 'accepted.extra.facilitatorAddress is not an address';
  return undefined;
}

function payloadProblem(payload: unknown): string | undefined {
  if (!isObject(payload)) return 'payload is not an object';
  if (typeof payload.signature !== 'string' || !SIGNATURE.test(payload.signature))
    return 'payload.signature is not 65 bytes of 0x-hex';
  const authorization = payload.authorization;
  if (!isObject(authorization)) return 'payload.authorization is not an object';
  for (const field of ['payer', 'payTo', 'facilitator'] as const)
    if (!isAddress(authorization[field])) return `payload.authorization.${field} is not an address`;
  for (const field of ['maxAmount', 'deadline'] as const) {
    const value = authorization[field];
    if (typeof value !== 'string' || !UINT256.test(value))
      return `payload.authorization.${field} is not a decimal string`;
  }
  if (typeof authorization.nonce !== 'string' || !BYTES32.test(authorization.nonce))
    return 'payload.authorization.nonce is not 32 bytes of 0x-hex';
  return undefined;
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
  if (isObject(value))
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonical(value[key])}`)
      .join(',')}}`;
  return JSON.stringify(value);
}

function isAddress(value: unknown): value is string {
  return typeof value === 'string' && ADDRESS.test(value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function refuse(code: PayloadFormError, message: string): ReadPayment {
  return { ok: false, code, message };
}
