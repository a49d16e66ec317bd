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
const DECIMAL = /^(0|[1-9][0-9]{0,77})$/;
const MAX_UINT256 = (1n << 256n) - 1n;

/**
 * Reads a `PAYMENT-SIGNATURE` in the protocol's check order (docs/protocol.md, Check order and codes).
 * Every check tells a field that is missing or ill-formed (of another JSON type, or not in its format) from
 * one that is there, well-formed, and not taken: the first is `invalid_payload`, for a payload that is no
 * payment this server can read; the second earns the field's own code.
 *
 * - not base64 of JSON, or JSON that is not an object → `invalid_payload`;
 * - `x402Version` missing or not a number → `invalid_payload`; a number other than 2 →
 *   `invalid_x402_version`, whatever the rest (another version's payment has that version's form);
 * - `accepted` not an object, or its `scheme` missing or not a string → `invalid_payload`; a scheme other
 *   than `prepaid-debit` → `unsupported_scheme`, whatever the rest;
 * - then any field of the prepaid-debit form missing or ill-formed → `invalid_payload`.
 *
 * The values of a well-formed payment (the network, the requirements, the authorization) are judged after,
 * against the current requirements and the chain, each by its own code.
 */
export function readPaymentSignature(header: string): ReadPayment {
  const decoded = decodeHeader(header);
  if (!isObject(decoded))
    return refuse('invalid_payload', 'PAYMENT-SIGNATURE must be base64 of a JSON object.');
  const version = decoded.x402Version;
  if (version === undefined) return malformed('x402Version is missing');
  if (typeof version !== 'number') return malformed('x402Version is not a number');
  if (version !== X402_VERSION)
    return refuse(
      'invalid_x402_version',
      `Unsupported x402 version ${version}; this server speaks version ${X402_VERSION}.`,
    );
  const accepted = decoded.accepted;
  if (!isObject(accepted)) return malformed('accepted is not an object');
  if (accepted.scheme === undefined) return malformed('accepted.scheme is missing');
  if (typeof accepted.scheme !== 'string') return malformed('accepted.scheme is not a string');
  if (accepted.scheme !== PREPAID_DEBIT)
    return refuse(
      'unsupported_scheme',
      `Scheme ${accepted.scheme} is not taken here; pay with ${PREPAID_DEBIT}.`,
    );
  const problem = requirementsProblem(accepted) ?? payloadProblem(decoded.payload);
  if (problem) return malformed(problem);
  return { ok: true, payment: decoded as unknown as PaymentPayload };
}

function requirementsProblem(accepted: Record<string, unknown>): string | undefined {
  if (typeof accepted.network !== 'string') return 'accepted.network is not a string';
  if (!isUint256(accepted.amount)) return 'accepted.amount is not a decimal uint256';
  if (!isAddress(accepted.asset)) return 'accepted.asset is not an address';
  if (!isAddress(accepted.payTo)) return 'accepted.payTo is not an address';
  if (!Number.isSafeInteger(accepted.maxTimeoutSeconds))
    return 'accepted.maxTimeoutSeconds is not an integer';
  const extra = accepted.extra;
  if (!isObject(extra)) return 'accepted.extra is not an object';
  if (typeof extra.name !== 'string') return 'accepted.extra.name is not a string';
  if (typeof extra.version !== 'string') return 'accepted.extra.version is not a string';
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
    if (!isUint256(authorization[field])) return `payload.authorization.${field} is not a decimal uint256`;
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

/** A decimal string of a uint256, as the contract takes amounts and deadlines: no sign, no leading zero. */
function isUint256(value: unknown): value is string {
  return typeof value === 'string' && DECIMAL.test(value) && BigInt(value) <= MAX_UINT256;
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

function malformed(problem: string): ReadPayment {
  return refuse('invalid_payload', `PAYMENT-SIGNATURE is malformed: ${problem}.`);
}
