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
