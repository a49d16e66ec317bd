import { hexlify, randomBytes, type Signer } from 'ethers';
import { DEBIT_AUTHORIZATION_TYPES, debitDomain } from '@svc/contracts';
import { decodeHeader, encodeHeader } from './wire.js';
import {
  isRecord,
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  PREPAID_DEBIT,
  X402_VERSION,
  type DebitAuthorizationJson,
  type PaymentPayload,
  type PaymentRequired,
  type PaymentResponse,
  type PrepaidDebitRequirements,
} from '@svc/api';

/** What a payer may choose when signing; everything else comes from the requirements. */
export interface PaymentOptions {
  /** Unix seconds. Default: now plus the requirements' `maxTimeoutSeconds`. */
  readonly deadline?: bigint;
  /** The most the payment may debit. Default: the requirements' `amount`. */
  readonly maxAmount?: bigint;
  /** 32 bytes, 0x-hex. Default: random. */
  readonly nonce?: string;
}

/** The chain id of a CAIP-2 `eip155:<id>` network. */
export function chainIdOf(network: string): bigint {
  const match = /^eip155:([0-9]{1,20})$/.exec(network);
  if (!match) throw new Error(`not an EVM network: ${network}`);
  return BigInt(match[1]!);
}

/**
 * Signs a `prepaid-debit` payment for `requirements` with the payer's wallet: the EIP-712
 * `DebitAuthorization` over JobRegistry's domain, naming the requirements' `payTo` and facilitator.
 */
export async function signPayment(
  payer: Signer,
  requirements: PrepaidDebitRequirements,
  options: PaymentOptions = {},
): Promise<PaymentPayload> {
  if (requirements.scheme !== PREPAID_DEBIT) throw new Error(`cannot pay scheme ${requirements.scheme}`);
  const authorization: DebitAuthorizationJson = {
    payer: await payer.getAddress(),
    payTo: requirements.payTo,
    facilitator: requirements.extra.facilitatorAddress,
    maxAmount: (options.maxAmount ?? BigInt(requirements.amount)).toString(),
    deadline: (
      options.deadline ?? BigInt(Math.floor(Date.now() / 1000) + requirements.maxTimeoutSeconds)
    ).toString(),
    nonce: options.nonce ?? hexlify(randomBytes(32)),
  };
  const signature = await payer.signTypedData(
    debitDomain(chainIdOf(requirements.network), requirements.asset),
    DEBIT_AUTHORIZATION_TYPES,
    authorization,
  );
  return { x402Version: X402_VERSION, accepted: requirements, payload: { signature, authorization } };
}

/** The `PAYMENT-SIGNATURE` header value paying `requirements`. */
export async function paymentSignatureFor(
  payer: Signer,
  requirements: PrepaidDebitRequirements,
  options: PaymentOptions = {},
): Promise<string> {
  return encodeHeader(await signPayment(payer, requirements, options));
}

/** Header lookup of a fetch `Response` or of a plain (any case) header record. */
type HeaderSource = Headers | Readonly<Record<string, string | string[] | undefined>>;

function header(headers: HeaderSource, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const record = headers as Readonly<Record<string, string | string[] | undefined>>;
  const key = Object.keys(record).find((candidate) => candidate.toLowerCase() === name.toLowerCase());
  const value = key === undefined ? undefined : record[key];
  return Array.isArray(value) ? value[0] : value;
}

/** The `PAYMENT-REQUIRED` of an answer, when it carries one. */
export function paymentRequiredOf(headers: HeaderSource): PaymentRequired | undefined {
  const value = header(headers, PAYMENT_REQUIRED_HEADER);
  const decoded = value === undefined ? undefined : decodeHeader(value);
  return isRecord(decoded) && Array.isArray(decoded.accepts)
    ? (decoded as unknown as PaymentRequired)
    : undefined;
}

/** The `PAYMENT-RESPONSE` of an answer, when it carries one. */
export function paymentResponseOf(headers: HeaderSource): PaymentResponse | undefined {
  const value = header(headers, PAYMENT_RESPONSE_HEADER);
  const decoded = value === undefined ? undefined : decodeHeader(value);
  return isRecord(decoded) && typeof decoded.success === 'boolean'
    ? (decoded as unknown as PaymentResponse)
    : undefined;
}

/** The `prepaid-debit` entry a 402 offers, from its `PAYMENT-REQUIRED` header. */
export function prepaidDebitRequirementsOf(headers: HeaderSource): PrepaidDebitRequirements | undefined {
  return paymentRequiredOf(headers)?.accepts.find((entry) => entry.scheme === PREPAID_DEBIT);
}

/**
 * Pays a 402 answer: signs its `prepaid-debit` entry with `payer` and returns the `PAYMENT-SIGNATURE` to
 * send the same call again with. Throws when the answer offers no such entry.
 */
export async function paymentSignatureForAnswer(
  payer: Signer,
  answerHeaders: HeaderSource,
  options: PaymentOptions = {},
): Promise<string> {
  const requirements = prepaidDebitRequirementsOf(answerHeaders);
  if (!requirements)
    throw new Error('the answer offers no prepaid-debit payment (no PAYMENT-REQUIRED entry)');
  return paymentSignatureFor(payer, requirements, options);
}
