import { describe, expect, it } from '@jest/globals';
import { Signature, TypedDataEncoder, Wallet, recoverAddress } from 'ethers';
import { DEBIT_AUTHORIZATION_TYPES, debitDomain } from '@svc/contracts';
import {
  chainIdOf,
  debitAuthorizationOf,
  decodeHeader,
  encodeHeader,
  paymentRequiredOf,
  paymentResponseOf,
  paymentSignatureForAnswer,
  readPaymentSignature,
  sameRequirements,
  signPayment,
  type PrepaidDebitRequirements,
} from '../src/index.js';

const REQUIREMENTS: PrepaidDebitRequirements = {
  scheme: 'prepaid-debit',
  network: 'eip155:31337',
  amount: '1000000000000000',
  asset: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  payTo: '0x70997970C51812dc3A010C7d01b50e0d17dc79C8',
  maxTimeoutSeconds: 120,
  extra: {
    name: 'JobRegistry',
    version: '1',
    facilitatorAddress: '0x976EA74026E726554dB657fA54763abd0C3a0aa9',
  },
};

const payer = Wallet.createRandom();

describe('signPayment', () => {
  it("signs the entry's authorization over JobRegistry's EIP-712 domain, echoing the entry as accepted", async () => {
    const before = Math.floor(Date.now() / 1000);
    const payment = await signPayment(payer, REQUIREMENTS);
    const { authorization, signature } = payment.payload;
    expect(payment.x402Version).toBe(2);
    expect(payment.accepted).toEqual(REQUIREMENTS);
    expect(authorization).toMatchObject({
      payer: payer.address,
      payTo: REQUIREMENTS.payTo,
      facilitator: REQUIREMENTS.extra.facilitatorAddress,
      maxAmount: REQUIREMENTS.amount,
    });
    expect(Number(authorization.deadline)).toBeGreaterThanOrEqual(before + 120);
    expect(authorization.nonce).toMatch(/^0x[0-9a-f]{64}$/);
    const digest = TypedDataEncoder.hash(
      debitDomain(31337n, REQUIREMENTS.asset),
      DEBIT_AUTHORIZATION_TYPES,
      debitAuthorizationOf(authorization),
    );
    expect(recoverAddress(digest, signature)).toBe(payer.address);
    // ethers signs canonically: low s, v 27 or 28, as JobRegistry requires.
    const parsed = Signature.from(signature);
    expect([27, 28]).toContain(parsed.v);
  });

  it('takes a chosen deadline, maximum and nonce, and a fresh nonce per payment otherwise', async () => {
    const nonce = `0x${'ab'.repeat(32)}`;
    const chosen = await signPayment(payer, REQUIREMENTS, { deadline: 42n, maxAmount: 7n, nonce });
    expect(chosen.payload.authorization).toMatchObject({ deadline: '42', maxAmount: '7', nonce });
    const [a, b] = await Promise.all([signPayment(payer, REQUIREMENTS), signPayment(payer, REQUIREMENTS)]);
    expect(a.payload.authorization.nonce).not.toBe(b.payload.authorization.nonce);
  });

  it('refuses another scheme and reads CAIP-2 EVM networks only', async () => {
    await expect(signPayment(payer, { ...REQUIREMENTS, scheme: 'exact' as 'prepaid-debit' })).rejects.toThrow(
      /cannot pay scheme exact/,
    );
    expect(chainIdOf('eip155:8453')).toBe(8453n);
    expect(() => chainIdOf('solana:mainnet')).toThrow(/not an EVM network/);
  });
});

describe('readPaymentSignature', () => {
  const valid = async () => signPayment(payer, REQUIREMENTS);

  it('reads a signed payment back as it was signed', async () => {
    const payment = await valid();
    expect(readPaymentSignature(encodeHeader(payment))).toEqual({ ok: true, payment });
  });

  it('refuses in the protocol order: not base64 JSON, then the version, then the scheme, then the form', async () => {
    const payment = await valid();
    const codeOf = (value: unknown) => {
      const read = readPaymentSignature(typeof value === 'string' ? value : encodeHeader(value));
      return read.ok ? 'ok' : read.code;
    };
    expect(codeOf('not base64 !')).toBe('invalid_payload');
    expect(codeOf(Buffer.from('{not json').toString('base64'))).toBe('invalid_payload');
    expect(codeOf([payment])).toBe('invalid_payload');
    expect(codeOf({ ...payment, x402Version: 1, payload: 'junk' })).toBe('invalid_x402_version');
    expect(codeOf({ x402Version: 2 })).toBe('invalid_payload');
    expect(codeOf({ ...payment, accepted: { ...payment.accepted, scheme: 'exact' }, payload: {} })).toBe(
      'unsupported_scheme',
    );
    const signature = payment.payload.signature;
    expect(codeOf({ ...payment, payload: { ...payment.payload, signature: signature.slice(0, -2) } })).toBe(
      'invalid_payload',
    );
    const authorization = payment.payload.authorization;
    for (const broken of [
      { ...authorization, payer: 'nobody' },
      { ...authorization, maxAmount: 1000 },
      { ...authorization, deadline: '-1' },
      { ...authorization, nonce: '0x1234' },
    ])
      expect(codeOf({ ...payment, payload: { ...payment.payload, authorization: broken } })).toBe(
        'invalid_payload',
      );
    expect(codeOf({ ...payment, accepted: { ...payment.accepted, amount: 5 } })).toBe('invalid_payload');
    // URL-safe base64 is read too.
    expect(codeOf(encodeHeader(payment).replaceAll('+', '-').replaceAll('/', '_'))).toBe('ok');
  });
});

describe('readPaymentSignature: a field missing or ill-formed is invalid_payload, one present and not taken its own code', () => {
  const valid = async () => signPayment(payer, REQUIREMENTS);
  const readOf = (value: unknown) =>
    readPaymentSignature(typeof value === 'string' ? value : encodeHeader(value));
  const codeOf = (value: unknown) => {
    const read = readOf(value);
    return read.ok ? 'ok' : read.code;
  };
  /** `value` without the field at `path` (dot-separated). */
  const without = (value: unknown, path: string): unknown => {
    const [head, ...rest] = path.split('.') as [string, ...string[]];
    const { [head]: inner, ...others } = value as Record<string, unknown>;
    return rest.length === 0 ? others : { ...others, [head]: without(inner, rest.join('.')) };
  };
  /** `value` with the field at `path` (dot-separated) set to `field`. */
  const withField = (value: unknown, path: string, field: unknown): unknown => {
    const [head, ...rest] = path.split('.') as [string, ...string[]];
    const record = value as Record<string, unknown>;
    return { ...record, [head]: rest.length === 0 ? field : withField(record[head], rest.join('.'), field) };
  };

  it('JSON that is no payment at all, {"hello":1}, is invalid_payload, not invalid_x402_version', () => {
    const read = readPaymentSignature(Buffer.from('{"hello":1}', 'utf8').toString('base64'));
    expect(read).toEqual({
      ok: false,
      code: 'invalid_payload',
      message: 'PAYMENT-SIGNATURE is malformed: x402Version is missing.',
    });
    expect(codeOf({})).toBe('invalid_payload');
  });

  it('x402Version: missing or not a number is invalid_payload; another number is invalid_x402_version, whatever the rest', async () => {
    const payment = await valid();
    expect(codeOf(without(payment, 'x402Version'))).toBe('invalid_payload');
    for (const version of [null, '2', true, [2], { major: 2 }])
      expect({ version, code: codeOf({ ...payment, x402Version: version }) }).toEqual({
        version,
        code: 'invalid_payload',
      });
    for (const version of [1, 3, 0, -2, 2.5])
      for (const value of [
        { ...payment, x402Version: version },
        { x402Version: version },
        { x402Version: version, accepted: 'nonsense', payload: 42 },
      ])
        expect({ version, code: codeOf(value) }).toEqual({ version, code: 'invalid_x402_version' });
    expect(readOf({ x402Version: 1 })).toMatchObject({ message: expect.stringMatching(/version 1;/) });
  });

  it('accepted.scheme: missing or not a string is invalid_payload; another scheme is unsupported_scheme, whatever the rest', async () => {
    const payment = await valid();
    expect(codeOf(without(payment, 'accepted'))).toBe('invalid_payload');
    for (const accepted of [null, 'prepaid-debit', ['prepaid-debit'], 7])
      expect({ accepted, code: codeOf({ ...payment, accepted }) }).toEqual({
        accepted,
        code: 'invalid_payload',
      });
    expect(codeOf(without(payment, 'accepted.scheme'))).toBe('invalid_payload');
    for (const scheme of [null, 7, ['prepaid-debit'], { name: 'prepaid-debit' }])
      expect({ scheme, code: codeOf(withField(payment, 'accepted.scheme', scheme)) }).toEqual({
        scheme,
        code: 'invalid_payload',
      });
    for (const scheme of ['exact', '', 'PREPAID-DEBIT']) {
      expect({ scheme, code: codeOf(withField(payment, 'accepted.scheme', scheme)) }).toEqual({
        scheme,
        code: 'unsupported_scheme',
      });
      expect(codeOf({ x402Version: 2, accepted: { scheme }, payload: 'junk' })).toBe('unsupported_scheme');
    }
  });

  it('every other field of the prepaid-debit form: missing or ill-formed is invalid_payload, naming the field', async () => {
    const payment = await valid();
    const uint256Overflow = (1n << 256n).toString();
    const illFormed: Record<string, unknown[]> = {
      'accepted.network': [null, 31337, { chainId: 31337 }],
      'accepted.amount': [null, 1000, '-1', '1e3', '01', uint256Overflow],
      'accepted.asset': [null, 42, 'JobRegistry', '0x1234'],
      'accepted.payTo': [null, 42, 'nobody'],
      'accepted.maxTimeoutSeconds': [null, '120', 1.5],
      'accepted.extra': [null, 'JobRegistry', []],
      'accepted.extra.name': [null, 1],
      'accepted.extra.version': [null, 1],
      'accepted.extra.facilitatorAddress': [null, 'facilitator'],
      payload: [null, 'junk', 42],
      'payload.signature': [null, 42, '0x1234', payment.payload.signature.slice(2)],
      'payload.authorization': [null, 'signed', []],
      'payload.authorization.payer': [null, 42, 'alice'],
      'payload.authorization.payTo': [null, 'bob'],
      'payload.authorization.facilitator': [null, 'carol'],
      'payload.authorization.maxAmount': [null, 1000, '-1', ' 1', uint256Overflow],
      'payload.authorization.deadline': [null, 1e10, '-1', uint256Overflow],
      'payload.authorization.nonce': [null, 7, '0x1234', `0x${'ab'.repeat(33)}`],
    };
    for (const [field, values] of Object.entries(illFormed)) {
      const missing = readOf(without(payment, field));
      expect({ field, missing: missing.ok || missing.code }).toEqual({ field, missing: 'invalid_payload' });
      expect(missing.ok || missing.message).toContain(field);
      for (const value of values) {
        const read = readOf(withField(payment, field, value));
        expect({ field, value, code: read.ok || read.code }).toEqual({
          field,
          value,
          code: 'invalid_payload',
        });
        expect(read.ok || read.message).toContain(field);
      }
    }
  });

  it('reads a well-formed payment whose values are not taken: those are judged after, each by its own code', async () => {
    const payment = await valid();
    const other = `0x${'12'.repeat(20)}`;
    const maxUint256 = ((1n << 256n) - 1n).toString();
    const wellFormed: Record<string, unknown> = {
      // invalid_network
      'accepted.network': 'eip155:1',
      // invalid_payment_requirements
      'accepted.amount': '1',
      'accepted.asset': other,
      'accepted.maxTimeoutSeconds': 1,
      'accepted.extra.name': 'USDC',
      'accepted.extra.version': '2',
      'accepted.extra.facilitatorAddress': other,
      'accepted.description': 'an extra field',
      // invalid_prepaid_debit_payload_facilitator_mismatch, _recipient_mismatch
      'payload.authorization.facilitator': other,
      'payload.authorization.payTo': other,
      // invalid_prepaid_debit_payload_expired, _over_cap
      'payload.authorization.deadline': '0',
      'payload.authorization.maxAmount': maxUint256,
      // invalid_prepaid_debit_payload_signature
      'payload.signature': `0x${'11'.repeat(65)}`,
    };
    for (const [field, value] of Object.entries(wellFormed))
      expect({ field, code: codeOf(withField(payment, field, value)) }).toEqual({ field, code: 'ok' });
  });
});

describe('sameRequirements', () => {
  it('ignores address case only: a changed fee, an extra field or a missing one differ', () => {
    const lower = {
      ...REQUIREMENTS,
      payTo: REQUIREMENTS.payTo.toLowerCase(),
      extra: {
        ...REQUIREMENTS.extra,
        facilitatorAddress: REQUIREMENTS.extra.facilitatorAddress.toLowerCase(),
      },
    };
    expect(sameRequirements(lower, REQUIREMENTS)).toBe(true);
    expect(sameRequirements({ ...REQUIREMENTS, amount: '1000000000000001' }, REQUIREMENTS)).toBe(false);
    expect(
      sameRequirements({ ...REQUIREMENTS, extra: { ...REQUIREMENTS.extra, version: '2' } }, REQUIREMENTS),
    ).toBe(false);
    expect(sameRequirements({ ...REQUIREMENTS, note: 'x' } as PrepaidDebitRequirements, REQUIREMENTS)).toBe(
      false,
    );
    const { maxTimeoutSeconds: _dropped, ...missing } = REQUIREMENTS;
    expect(sameRequirements(missing as PrepaidDebitRequirements, REQUIREMENTS)).toBe(false);
  });
});

describe('answers', () => {
  const required = {
    x402Version: 2,
    error: 'payment_required',
    resource: { url: 'u', description: 'd', mimeType: 'm' },
    accepts: [REQUIREMENTS],
  };

  it('pays a 402 from its PAYMENT-REQUIRED header, read from fetch Headers or a plain record', async () => {
    const headers = new Headers({ 'payment-required': encodeHeader(required) });
    expect(paymentRequiredOf(headers)).toEqual(required);
    expect(paymentRequiredOf({ 'PAYMENT-REQUIRED': encodeHeader(required) })).toEqual(required);
    const read = readPaymentSignature(await paymentSignatureForAnswer(payer, headers));
    expect(read.ok && read.payment.accepted).toEqual(REQUIREMENTS);
    await expect(paymentSignatureForAnswer(payer, new Headers())).rejects.toThrow(/offers no prepaid-debit/);
  });

  it('reads PAYMENT-RESPONSE, and nothing from headers that are absent or not x402', () => {
    const settled = {
      success: true,
      transaction: '0xab',
      network: 'eip155:31337',
      payer: payer.address,
      amount: '1',
    };
    expect(paymentResponseOf({ 'payment-response': encodeHeader(settled) })).toEqual(settled);
    expect(paymentResponseOf({})).toBeUndefined();
    expect(paymentResponseOf({ 'payment-response': 'garbage' })).toBeUndefined();
    expect(decodeHeader('')).toBeUndefined();
  });
});
