import { z } from 'zod';
import { PREPAID_DEBIT, X402_VERSION, type PaymentPayload } from './wire.js';

// The form of a `PAYMENT-SIGNATURE` payload, in the protocol's check order (docs/protocol.md, Check order
// and codes). Every check tells a field that is missing or ill-formed (of another JSON type, or not in its
// format) from one that is there, well-formed, and not taken: the first is `invalid_payload`, for a payload
// that is no payment this server can read; the second earns the field's own code.
//
// - not a JSON object → `invalid_payload`;
// - `x402Version` missing or not a number → `invalid_payload`; a number other than 2 →
//   `invalid_x402_version`, whatever the rest (another version's payment has that version's form);
// - `accepted` not an object, or its `scheme` missing or not a string → `invalid_payload`; a scheme other
//   than `prepaid-debit` → `unsupported_scheme`, whatever the rest;
// - then any field of the prepaid-debit form missing or ill-formed → `invalid_payload`, naming the field.
//
// The values of a well-formed payment (the network, the requirements, the authorization) are judged after,
// against the current requirements and the chain, each by its own code.

/** The refusals a `PAYMENT-SIGNATURE` can earn from its form alone, before anything is read on chain. */
export type PayloadFormError = 'invalid_payload' | 'invalid_x402_version' | 'unsupported_scheme';

export type ReadPayment =
  | { readonly ok: true; readonly payment: PaymentPayload }
  | { readonly ok: false; readonly code: PayloadFormError; readonly message: string };

const ADDRESS = /^0x[0-9a-fA-F]{40}$/;
const BYTES32 = /^0x[0-9a-fA-F]{64}$/;
const SIGNATURE = /^0x[0-9a-fA-F]{130}$/;
/** A uint256 as the contract takes amounts and deadlines: no sign, no leading zero. */
const DECIMAL = /^(0|[1-9][0-9]{0,77})$/;
const MAX_UINT256 = (1n << 256n) - 1n;

const NOT_AN_OBJECT = 'PAYMENT-SIGNATURE must be base64 of a JSON object.';

type IssuePath = { readonly path?: readonly PropertyKey[] };

/** `accepted.extra.name`: the field an issue is about. */
function fieldOf(issue: IssuePath): string {
  return (issue.path ?? []).map(String).join('.');
}

function malformed(problem: string): string {
  return `PAYMENT-SIGNATURE is malformed: ${problem}.`;
}

/** The message of a field that is missing or not `what` (`an address`, `a decimal uint256`). */
function notA(what: string) {
  return (issue: IssuePath) => malformed(`${fieldOf(issue)} is not ${what}`);
}

/** A refusal with a code of its own, carried on the issue. */
function refusal(code: Exclude<PayloadFormError, 'invalid_payload'>) {
  return { params: { refusal: code }, abort: true } as const;
}

const object = <Shape extends z.core.$ZodLooseShape>(shape: Shape) =>
  z.looseObject(shape, { error: notA('an object') });
const string = () => z.string({ error: notA('a string') });
const address = () =>
  z.string({ error: notA('an address') }).regex(ADDRESS, { error: notA('an address'), abort: true });
const uint256 = () =>
  z
    .string({ error: notA('a decimal uint256') })
    .regex(DECIMAL, { error: notA('a decimal uint256'), abort: true })
    .refine((value) => BigInt(value) <= MAX_UINT256, { error: notA('a decimal uint256') });

/** First the version: a number (JSON's: any, infinite ones included), then the one spoken here. */
const versioned = z
  .looseObject(
    {
      x402Version: z.custom<number>((value) => typeof value === 'number', {
        error: (issue) =>
          malformed(`x402Version ${issue.input === undefined ? 'is missing' : 'is not a number'}`),
      }),
    },
    { error: NOT_AN_OBJECT },
  )
  .refine((payload) => payload.x402Version === X402_VERSION, {
    error: (issue) =>
      `Unsupported x402 version ${(issue.input as { x402Version: number }).x402Version}; this server speaks version ${X402_VERSION}.`,
    ...refusal('invalid_x402_version'),
  });

/** Then the scheme: a string, then the one taken here. */
const ofScheme = z
  .looseObject({
    accepted: object({
      scheme: z.string({
        error: (issue) =>
          malformed(`accepted.scheme ${issue.input === undefined ? 'is missing' : 'is not a string'}`),
      }),
    }),
  })
  .refine((payload) => payload.accepted.scheme === PREPAID_DEBIT, {
    error: (issue) =>
      `Scheme ${(issue.input as { accepted: { scheme: string } }).accepted.scheme} is not taken here; pay with ${PREPAID_DEBIT}.`,
    ...refusal('unsupported_scheme'),
  });

/**
 * The form of a version 2 `prepaid-debit` payment, field by field; fields it does not name are kept (they
 * make it another payment). `readPaymentPayload` reads a payload against it once its version and scheme
 * passed, so that those two earn their own codes.
 */
export const paymentPayloadSchema: z.ZodType<PaymentPayload, unknown> = z.looseObject({
  x402Version: z.literal(X402_VERSION),
  accepted: object({
    scheme: z.literal(PREPAID_DEBIT),
    network: string(),
    amount: uint256(),
    asset: address(),
    payTo: address(),
    maxTimeoutSeconds: z.custom<number>((value) => Number.isSafeInteger(value), {
      error: notA('an integer'),
    }),
    extra: object({ name: string(), version: string(), facilitatorAddress: address() }),
  }),
  payload: object({
    signature: z
      .string({ error: notA('65 bytes of 0x-hex') })
      .regex(SIGNATURE, { error: notA('65 bytes of 0x-hex') }),
    authorization: object({
      payer: address(),
      payTo: address(),
      facilitator: address(),
      maxAmount: uint256(),
      deadline: uint256(),
      nonce: z
        .string({ error: notA('32 bytes of 0x-hex') })
        .regex(BYTES32, { error: notA('32 bytes of 0x-hex') }),
    }),
  }),
});

/** The checks in the protocol's order: a payload is refused at the first stage that refuses it. */
const STAGES = [versioned, ofScheme, paymentPayloadSchema] as const;

/**
 * Reads the JSON of a `PAYMENT-SIGNATURE` (undefined: the header was not base64 of JSON). A payload that is
 * not taken is refused with the first problem in the protocol's order: its code and a message naming it.
 */
export function readPaymentPayload(decoded: unknown): ReadPayment {
  for (const stage of STAGES) {
    const parsed = stage.safeParse(decoded);
    if (parsed.success) continue;
    const [first] = parsed.error.issues;
    const code =
      first?.code === 'custom' ? (first.params?.refusal as PayloadFormError | undefined) : undefined;
    return { ok: false, code: code ?? 'invalid_payload', message: first?.message ?? NOT_AN_OBJECT };
  }
  // The payload as it came, fields this server does not read included.
  return { ok: true, payment: decoded as PaymentPayload };
}
