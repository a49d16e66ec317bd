import { describe, expect, it } from '@jest/globals';
import type { PaymentPayload } from '../src/index.js';
import { paymentPayloadSchema, readPaymentPayload } from '../src/schemas.js';

// The form of a PAYMENT-SIGNATURE's JSON (the header's base64 and the signature itself are @svc/x402's and
// the payment-settler's, tested there).

const ADDRESS = '0x5FbDB2315678afecb367f032d93F642f64180aa3';
const PAYMENT: PaymentPayload = {
  x402Version: 2,
  accepted: {
    scheme: 'prepaid-debit',
    network: 'eip155:31337',
    amount: '1000000000000000',
    asset: ADDRESS,
    payTo: ADDRESS,
    maxTimeoutSeconds: 120,
    extra: { name: 'JobRegistry', version: '1', facilitatorAddress: ADDRESS },
  },
  payload: {
    signature: `0x${'11'.repeat(65)}`,
    authorization: {
      payer: ADDRESS,
      payTo: ADDRESS,
      facilitator: ADDRESS,
      maxAmount: '1000000000000000',
      deadline: '1700000000',
      nonce: `0x${'ab'.repeat(32)}`,
    },
  },
};

/** `PAYMENT` with the field at `path` set to `value`, or removed when `value` is undefined. */
function withField(path: string, value: unknown): unknown {
  const copy = structuredClone(PAYMENT) as unknown as Record<string, unknown>;
  const keys = path.split('.');
  let target = copy;
  for (const key of keys.slice(0, -1)) target = target[key] as Record<string, unknown>;
  const last = keys.at(-1)!;
  if (value === undefined) delete target[last];
  else target[last] = value;
  return copy;
}

describe('readPaymentPayload: what it takes', () => {
  it('takes a well-formed payment and hands it back as it came, fields it does not read included', () => {
    expect(readPaymentPayload(PAYMENT)).toEqual({ ok: true, payment: PAYMENT });
    const extra = withField('accepted.description', 'another entry');
    const read = readPaymentPayload(extra);
    expect(read.ok && read.payment).toBe(extra);
  });

  it('takes well-formed values it does not judge: another network, the largest uint256, an unknown name', () => {
    for (const [path, value] of [
      ['accepted.network', 'eip155:1'],
      ['payload.authorization.maxAmount', ((1n << 256n) - 1n).toString()],
      ['payload.authorization.deadline', '0'],
      ['accepted.extra.name', 'USDC'],
      ['accepted.maxTimeoutSeconds', -1],
    ] as const)
      expect({ path, ok: readPaymentPayload(withField(path, value)).ok }).toEqual({ path, ok: true });
  });

  it('has a schema for the form alone, which takes the same payment', () => {
    expect(paymentPayloadSchema.parse(PAYMENT)).toEqual(PAYMENT);
  });
});

describe('readPaymentPayload: each refusal', () => {
  it('JSON that is no object (or a header that did not decode) is invalid_payload', () => {
    for (const decoded of [undefined, null, 2, 'prepaid-debit', [PAYMENT]])
      expect(readPaymentPayload(decoded)).toEqual({
        ok: false,
        code: 'invalid_payload',
        message: 'PAYMENT-SIGNATURE must be base64 of a JSON object.',
      });
  });

  it('x402Version missing or not a number is invalid_payload, naming it', () => {
    expect(readPaymentPayload({ hello: 1 })).toEqual({
      ok: false,
      code: 'invalid_payload',
      message: 'PAYMENT-SIGNATURE is malformed: x402Version is missing.',
    });
    for (const version of [null, '2', true, [2]])
      expect(readPaymentPayload({ ...PAYMENT, x402Version: version })).toEqual({
        ok: false,
        code: 'invalid_payload',
        message: 'PAYMENT-SIGNATURE is malformed: x402Version is not a number.',
      });
  });

  it('another version number is invalid_x402_version, whatever the rest', () => {
    expect(readPaymentPayload({ x402Version: 1, accepted: 'nonsense', payload: 42 })).toEqual({
      ok: false,
      code: 'invalid_x402_version',
      message: 'Unsupported x402 version 1; this server speaks version 2.',
    });
    // JSON's numbers include ones too large to be finite: still a number, still another version.
    expect(readPaymentPayload(JSON.parse('{"x402Version":1e400}'))).toMatchObject({
      code: 'invalid_x402_version',
      message: 'Unsupported x402 version Infinity; this server speaks version 2.',
    });
  });

  it('accepted not an object, or its scheme missing or not a string, is invalid_payload, naming it', () => {
    for (const [value, problem] of [
      [withField('accepted', undefined), 'accepted is not an object'],
      [withField('accepted', ['prepaid-debit']), 'accepted is not an object'],
      [withField('accepted.scheme', undefined), 'accepted.scheme is missing'],
      [withField('accepted.scheme', 7), 'accepted.scheme is not a string'],
    ] as const)
      expect(readPaymentPayload(value)).toEqual({
        ok: false,
        code: 'invalid_payload',
        message: `PAYMENT-SIGNATURE is malformed: ${problem}.`,
      });
  });

  it('another scheme is unsupported_scheme, whatever the rest', () => {
    expect(readPaymentPayload({ x402Version: 2, accepted: { scheme: 'exact' }, payload: 'junk' })).toEqual({
      ok: false,
      code: 'unsupported_scheme',
      message: 'Scheme exact is not taken here; pay with prepaid-debit.',
    });
  });

  it.each([
    ['accepted.network', 31337, 'accepted.network is not a string'],
    ['accepted.amount', '01', 'accepted.amount is not a decimal uint256'],
    ['accepted.amount', (1n << 256n).toString(), 'accepted.amount is not a decimal uint256'],
    ['accepted.asset', 'JobRegistry', 'accepted.asset is not an address'],
    ['accepted.payTo', undefined, 'accepted.payTo is not an address'],
    ['accepted.maxTimeoutSeconds', 1.5, 'accepted.maxTimeoutSeconds is not an integer'],
    ['accepted.extra', [], 'accepted.extra is not an object'],
    ['accepted.extra.name', 1, 'accepted.extra.name is not a string'],
    ['accepted.extra.version', null, 'accepted.extra.version is not a string'],
    [
      'accepted.extra.facilitatorAddress',
      'facilitator',
      'accepted.extra.facilitatorAddress is not an address',
    ],
    ['payload', 'junk', 'payload is not an object'],
    ['payload.signature', '0x1234', 'payload.signature is not 65 bytes of 0x-hex'],
    ['payload.authorization', [], 'payload.authorization is not an object'],
    ['payload.authorization.payer', 'alice', 'payload.authorization.payer is not an address'],
    ['payload.authorization.payTo', undefined, 'payload.authorization.payTo is not an address'],
    ['payload.authorization.facilitator', 42, 'payload.authorization.facilitator is not an address'],
    ['payload.authorization.maxAmount', 1000, 'payload.authorization.maxAmount is not a decimal uint256'],
    ['payload.authorization.deadline', '-1', 'payload.authorization.deadline is not a decimal uint256'],
    ['payload.authorization.nonce', '0x1234', 'payload.authorization.nonce is not 32 bytes of 0x-hex'],
  ])('%s as %p is invalid_payload', (path, value, problem) => {
    expect(readPaymentPayload(withField(path, value))).toEqual({
      ok: false,
      code: 'invalid_payload',
      message: `PAYMENT-SIGNATURE is malformed: ${problem}.`,
    });
  });

  it('names the first field in the protocol order: accepted before payload, field by field', () => {
    const both = {
      ...(withField('payload.signature', 'x') as object),
      accepted: { ...PAYMENT.accepted, amount: 1 },
    };
    expect(readPaymentPayload(both)).toMatchObject({ message: expect.stringContaining('accepted.amount') });
    const two = withField('accepted.asset', 'x') as { accepted: Record<string, unknown> };
    two.accepted.network = 1;
    expect(readPaymentPayload(two)).toMatchObject({ message: expect.stringContaining('accepted.network') });
  });
});
