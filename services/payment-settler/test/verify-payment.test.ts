import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { parseEther, Wallet } from 'ethers';
import { MemoryStore, prepaidDebitRequirementsFromProto } from '@svc/platform';
import { PaymentRefusalCode, type PaymentRefusal } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { useDevnet } from '@svc/testkit';
import {
  paymentSignatureFor,
  signPayment,
  type PaymentPayload,
  type PrepaidDebitRequirements,
} from '@svc/x402';
import {
  ACCOUNTS,
  currentRequirements,
  debitDigest,
  DEPLOYED_MODELS,
  depositedWallet,
  ecrecover,
  header,
  highSTwin,
  MODEL,
  nowSeconds,
  perCallEnv,
  preparePerCallAccounts,
  refusalOf,
  REPRICED_MODEL,
  setFacilitatorAuthorized,
  setModelFee,
  signedPayload,
  startSettler,
  verifiedOf,
  verify,
  type Settler,
} from './support/settler.js';

// VerifyPayment against a real settler on a real devnet: real wallets sign real EIP-712 authorizations,
// and every refusal code of the protocol's check table comes back in its order.
const devnet = useDevnet({ models: DEPLOYED_MODELS, accounts: 14 });
const store = new MemoryStore();
let settler: Settler;

beforeAll(async () => {
  await preparePerCallAccounts(devnet());
  // The chain is changed under the settler (the facilitator's authorization): no caching.
  settler = await startSettler(devnet(), store, perCallEnv(devnet(), { CHAIN_CACHE_TTL: '1ms' }));
}, 60_000);

afterAll(async () => {
  await settler?.stop();
  await store.close();
});

const requirements = (model = MODEL.name) => currentRequirements(settler.client, model);
const payer = (deposit?: bigint) => depositedWallet(devnet(), deposit);
const stranger = () => devnet().wallet(ACCOUNTS.stranger);

/**
 * The refusal of a payment; every refusal of a settler that takes payments carries the current
 * requirements, so the caller can rebuild PAYMENT-REQUIRED.
 */
async function refused(paymentSignature: string, model = MODEL.name): Promise<PaymentRefusal> {
  const refusal = refusalOf(await verify(settler.client, paymentSignature, { model }));
  expect(refusal.currentRequirements).toBeDefined();
  expect(prepaidDebitRequirementsFromProto(refusal.currentRequirements!)).toEqual(await requirements(model));
  expect(refusal.message).not.toBe('');
  return refusal;
}

/** Verifies a payment that must pass, then frees its nonce again. */
async function expectVerifies(paymentSignature: string, model = MODEL.name): Promise<void> {
  const verified = verifiedOf(await verify(settler.client, paymentSignature, { model }));
  await settler.client.releasePayment({ reservationId: verified.reservationId });
}

async function withFacilitatorRevoked(run: () => Promise<void>): Promise<void> {
  await setFacilitatorAuthorized(devnet(), false);
  try {
    await run();
  } finally {
    await setFacilitatorAuthorized(devnet(), true);
  }
}

/** A payment payload with `accepted` replaced (the signed authorization untouched). */
function withAccepted(payment: PaymentPayload, accepted: Record<string, unknown>): unknown {
  return { ...payment, accepted };
}

describe('VerifyPayment refuses in the check order of the protocol', () => {
  it('1 invalid_payload: a header that is not base64', async () => {
    for (const value of ['not base64!', '***', '{"x402Version":2}', ' ']) {
      const refusal = await refused(value);
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
      expect(refusal.payer).toBeUndefined();
    }
  });

  it('1 invalid_payload: base64 of something that is not JSON', async () => {
    for (const text of ['x402Version: 2', '{"x402Version":2', 'prepaid-debit']) {
      const refusal = await refused(Buffer.from(text, 'utf8').toString('base64'));
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
      expect(refusal.payer).toBeUndefined();
    }
  });

  it('1 invalid_payload: JSON that is not an object', async () => {
    for (const value of [[{ x402Version: 2 }], 'prepaid-debit', 2, null, true]) {
      const refusal = await refused(header(value));
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
      expect(refusal.payer).toBeUndefined();
    }
  });

  it('1 invalid_payload: JSON that is no payment ({"hello":1}), or whose x402Version is missing or not a number', async () => {
    const good = await signPayment(await payer(), await requirements());
    const { x402Version: _version, ...unversioned } = good;
    for (const value of [
      Buffer.from('{"hello":1}', 'utf8').toString('base64'),
      header({}),
      header(unversioned),
      header({ ...good, x402Version: '2' }),
      header({ ...good, x402Version: null }),
      header({ ...good, x402Version: [2] }),
    ]) {
      const refusal = await refused(value);
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
      expect(refusal.payer).toBeUndefined();
    }
  });

  it('2 invalid_x402_version: a version that is a number other than 2, even when the rest is malformed or well signed', async () => {
    const good = await signPayment(await payer(), await requirements());
    for (const value of [
      { x402Version: 1 },
      { x402Version: 1, accepted: 'nonsense', payload: 42 },
      { ...good, x402Version: 1 },
      { ...good, x402Version: 3 },
      { ...good, x402Version: 0 },
    ]) {
      const refusal = await refused(header(value));
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_X402_VERSION);
      expect(refusal.payer).toBeUndefined();
    }
  });

  it('3 unsupported_scheme: another scheme', async () => {
    const good = await signPayment(await payer(), await requirements());
    const refusal = await refused(header(withAccepted(good, { ...good.accepted, scheme: 'exact' })));
    expect(refusal.code).toBe(PaymentRefusalCode.UNSUPPORTED_SCHEME);
    expect(refusal.payer).toBeUndefined();
  });

  it('1 invalid_payload, not unsupported_scheme: accepted.scheme missing or not a string', async () => {
    const good = await signPayment(await payer(), await requirements());
    const { scheme: _scheme, ...unnamed } = good.accepted;
    for (const accepted of [unnamed, { ...good.accepted, scheme: 7 }, { ...good.accepted, scheme: null }]) {
      const refusal = await refused(header(withAccepted(good, accepted)));
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYLOAD);
      expect(refusal.payer).toBeUndefined();
    }
  });

  it('1 invalid_payload: a prepaid-debit payment with a field missing or ill-formed (after version and scheme)', async () => {
    const good = await signPayment(await payer(), await requirements());
    const { signature, authorization } = good.payload;
    const { amount: _amount, ...acceptedWithoutAmount } = good.accepted;
    const { nonce: _nonce, ...authorizationWithoutNonce } = authorization;
    const { facilitator: _facilitator, ...authorizationWithoutFacilitator } = authorization;
    const { network: _network, ...networkless } = good.accepted;
    const malformed: Record<string, unknown> = {
      'no payload': { x402Version: 2, accepted: good.accepted },
      'no accepted': { x402Version: 2, payload: good.payload },
      'no accepted.amount': withAccepted(good, acceptedWithoutAmount),
      'no authorization.nonce': { ...good, payload: { signature, authorization: authorizationWithoutNonce } },
      'no signature': { ...good, payload: { authorization } },
      'a 64-byte signature': { ...good, payload: { signature: signature.slice(0, 130), authorization } },
      'a 66-byte signature': { ...good, payload: { signature: `${signature}00`, authorization } },
      'a signature without 0x': { ...good, payload: { signature: `${signature.slice(2)}00`, authorization } },
      'a 31-byte nonce': {
        ...good,
        payload: { signature, authorization: { ...authorization, nonce: authorization.nonce.slice(0, 64) } },
      },
      'a payer that is no address': {
        ...good,
        payload: { signature, authorization: { ...authorization, payer: 'alice' } },
      },
      'a maxAmount as a number': {
        ...good,
        payload: {
          signature,
          authorization: { ...authorization, maxAmount: Number(authorization.maxAmount) },
        },
      },
      'a negative deadline': {
        ...good,
        payload: { signature, authorization: { ...authorization, deadline: '-1' } },
      },
      // Decimal strings, but past uint256: no amount or deadline the contract can take.
      'a maxAmount above uint256': {
        ...good,
        payload: { signature, authorization: { ...authorization, maxAmount: (1n << 256n).toString() } },
      },
      'a deadline above uint256': {
        ...good,
        payload: { signature, authorization: { ...authorization, deadline: '9'.repeat(78) } },
      },
      'no network': withAccepted(good, networkless),
      'a network that is a number': withAccepted(good, { ...good.accepted, network: 31337 }),
      'no authorization.facilitator': {
        ...good,
        payload: { signature, authorization: authorizationWithoutFacilitator },
      },
    };
    for (const [what, value] of Object.entries(malformed)) {
      const refusal = await refused(header(value));
      expect({ what, code: refusal.code, payer: refusal.payer }).toEqual({
        what,
        code: PaymentRefusalCode.INVALID_PAYLOAD,
        payer: undefined,
      });
    }
  });

  it('4 invalid_network: another network', async () => {
    const wallet = await payer();
    const current = await requirements();
    // Signed consistently for mainnet: the network alone is wrong.
    const refusal = await refused(await paymentSignatureFor(wallet, { ...current, network: 'eip155:1' }));
    expect(refusal.code).toBe(PaymentRefusalCode.INVALID_NETWORK);
    expect(refusal.payer?.hex).toBe(wallet.address);
  });

  it('5 invalid_payment_requirements: the fee changed on chain after the payment was signed', async () => {
    const wallet = await payer();
    const before = await requirements(REPRICED_MODEL.name);
    expect(before.amount).toBe(REPRICED_MODEL.feeWei.toString());
    const stale = await paymentSignatureFor(wallet, before);
    const newFee = REPRICED_MODEL.feeWei + parseEther('0.0005');
    await setModelFee(devnet(), REPRICED_MODEL.name, newFee);
    try {
      const refusal = await refused(stale, REPRICED_MODEL.name);
      expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYMENT_REQUIREMENTS);
      expect(refusal.payer?.hex).toBe(wallet.address);
      // The refusal names the new fee; a payment rebuilt from it passes.
      expect(refusal.currentRequirements?.amount?.decimal).toBe(newFee.toString());
      await expectVerifies(
        await paymentSignatureFor(wallet, prepaidDebitRequirementsFromProto(refusal.currentRequirements!)),
        REPRICED_MODEL.name,
      );
    } finally {
      await setModelFee(devnet(), REPRICED_MODEL.name, REPRICED_MODEL.feeWei);
    }
  });

  it('5 invalid_payment_requirements: accepted tampered in any field, though the authorization is well signed', async () => {
    const wallet = await payer();
    const current = await requirements();
    const good = await signPayment(wallet, current);
    const tampered: Record<string, Record<string, unknown>> = {
      'a lower amount': { ...current, amount: (MODEL.feeWei - 1n).toString() },
      'a higher amount': { ...current, amount: (MODEL.feeWei + 1n).toString() },
      'another asset': { ...current, asset: stranger().address },
      'another payTo': { ...current, payTo: stranger().address },
      'another maxTimeoutSeconds': { ...current, maxTimeoutSeconds: current.maxTimeoutSeconds + 1 },
      'another extra.name': { ...current, extra: { ...current.extra, name: 'USDC' } },
      'another extra.version': { ...current, extra: { ...current.extra, version: '2' } },
      'another extra.facilitatorAddress': {
        ...current,
        extra: { ...current.extra, facilitatorAddress: stranger().address },
      },
      'an extra field': { ...current, description: 'one completion' },
    };
    for (const [what, accepted] of Object.entries(tampered)) {
      const refusal = await refused(header(withAccepted(good, accepted)));
      expect({ what, code: refusal.code, payer: refusal.payer?.hex }).toEqual({
        what,
        code: PaymentRefusalCode.INVALID_PAYMENT_REQUIREMENTS,
        payer: wallet.address,
      });
    }
    // Addresses compare without regard to case: the same requirements lower-cased are the requirements.
    const lowerCased = {
      ...current,
      asset: current.asset.toLowerCase(),
      payTo: current.payTo.toLowerCase(),
      extra: { ...current.extra, facilitatorAddress: current.extra.facilitatorAddress.toLowerCase() },
    };
    await expectVerifies(header(withAccepted(good, lowerCased)));
  });

  it('6 expired: the deadline passed', async () => {
    const wallet = await payer();
    const payment = await signedPayload(wallet, await requirements(), {
      deadline: String(nowSeconds() - 60),
    });
    const refusal = await refused(header(payment));
    expect(refusal.code).toBe(PaymentRefusalCode.EXPIRED);
    expect(refusal.payer?.hex).toBe(wallet.address);
  });

  it('7 facilitator_mismatch: the authorization names another facilitator', async () => {
    const wallet = await payer();
    const payment = await signedPayload(wallet, await requirements(), { facilitator: stranger().address });
    const refusal = await refused(header(payment));
    expect(refusal.code).toBe(PaymentRefusalCode.FACILITATOR_MISMATCH);
    expect(refusal.payer?.hex).toBe(wallet.address);
  });

  it('8 recipient_mismatch: the authorization names another payTo', async () => {
    const wallet = await payer();
    const payment = await signedPayload(wallet, await requirements(), {
      payTo: devnet().wallet(ACCOUNTS.otherPayTo).address,
    });
    const refusal = await refused(header(payment));
    expect(refusal.code).toBe(PaymentRefusalCode.RECIPIENT_MISMATCH);
    expect(refusal.payer?.hex).toBe(wallet.address);
  });

  it('9 facilitator_not_authorized: payTo revoked the facilitator; the same payment passes once it is restored', async () => {
    const wallet = await payer();
    const paymentSignature = await paymentSignatureFor(wallet, await requirements());
    await withFacilitatorRevoked(async () => {
      const refusal = await refused(paymentSignature);
      expect(refusal.code).toBe(PaymentRefusalCode.FACILITATOR_NOT_AUTHORIZED);
      expect(refusal.payer?.hex).toBe(wallet.address);
    });
    await expectVerifies(paymentSignature);
  });

  it('10 nonce_used: the nonce is reserved by a concurrent verification of the same payment', async () => {
    const wallet = await payer();
    const paymentSignature = await paymentSignatureFor(wallet, await requirements());
    const held = verifiedOf(await verify(settler.client, paymentSignature));
    try {
      const refusal = await refused(paymentSignature);
      expect(refusal.code).toBe(PaymentRefusalCode.NONCE_USED);
      expect(refusal.payer?.hex).toBe(wallet.address);
      // Another payment with the same (payer, nonce), even with another cap, is the same reservation.
      const sameNonce = await signedPayload(wallet, await requirements(), {
        nonce: held.nonce!.hex,
        maxAmount: (MODEL.feeWei * 2n).toString(),
      });
      expect((await refused(header(sameNonce))).code).toBe(PaymentRefusalCode.NONCE_USED);
      // The nonce is per payer: another payer's payment with the same nonce is not held.
      await expectVerifies(
        header(await signedPayload(await payer(), await requirements(), { nonce: held.nonce!.hex })),
      );
    } finally {
      await settler.client.releasePayment({ reservationId: held.reservationId });
    }
  });

  it('11 signature: signed by another wallet than the payer', async () => {
    const wallet = await payer();
    const payment = await signedPayload(wallet, await requirements(), {}, { signer: Wallet.createRandom() });
    const refusal = await refused(header(payment));
    expect(refusal.code).toBe(PaymentRefusalCode.SIGNATURE_INVALID);
    expect(refusal.payer?.hex).toBe(wallet.address);
  });

  it("11 signature: signed over another chain id's domain", async () => {
    const wallet = await payer();
    const payment = await signedPayload(wallet, await requirements(), {}, { domainChainId: 1n });
    const refusal = await refused(header(payment));
    expect(refusal.code).toBe(PaymentRefusalCode.SIGNATURE_INVALID);
    expect(refusal.payer?.hex).toBe(wallet.address);
  });

  it('11 signature: the high-s twin of a valid signature (s = n - s, v flipped), or a v other than 27 and 28', async () => {
    const wallet = await payer();
    const current = await requirements();
    const good = await signPayment(wallet, current);
    const { signature, authorization } = good.payload;
    const twin = highSTwin(signature);
    expect(twin).not.toBe(signature);
    // The twin is a genuine signature of the payer over the same digest: only the low-s rule refuses it.
    const digest = debitDigest(BigInt(devnet().anvil.chainId), current.asset, authorization);
    expect(await ecrecover(devnet(), digest, twin)).toBe(wallet.address);
    expect(await ecrecover(devnet(), digest, signature)).toBe(wallet.address);

    const twinRefusal = await refused(header({ ...good, payload: { signature: twin, authorization } }));
    expect(twinRefusal.code).toBe(PaymentRefusalCode.SIGNATURE_INVALID);
    expect(twinRefusal.payer?.hex).toBe(wallet.address);
    const v = parseInt(signature.slice(-2), 16);
    const rawV = `${signature.slice(0, -2)}${(v - 27).toString(16).padStart(2, '0')}`;
    expect((await refused(header({ ...good, payload: { signature: rawV, authorization } }))).code).toBe(
      PaymentRefusalCode.SIGNATURE_INVALID,
    );
    // The original, low-s signature of the same payment passes.
    await expectVerifies(header(good));
  });

  it('12 over_cap: maxAmount below the fee; a cap above the fee passes and only the fee is expected', async () => {
    const wallet = await payer();
    const current = await requirements();
    const refusal = await refused(
      await paymentSignatureFor(wallet, current, { maxAmount: MODEL.feeWei - 1n }),
    );
    expect(refusal.code).toBe(PaymentRefusalCode.OVER_CAP);
    expect(refusal.payer?.hex).toBe(wallet.address);

    const generous = verifiedOf(
      await verify(
        settler.client,
        await paymentSignatureFor(wallet, current, { maxAmount: MODEL.feeWei * 3n }),
      ),
    );
    expect(generous.amountWei?.decimal).toBe(MODEL.feeWei.toString());
    expect(generous.maxAmountWei?.decimal).toBe((MODEL.feeWei * 3n).toString());
    await settler.client.releasePayment({ reservationId: generous.reservationId });
  });

  it('13 insufficient_funds: a payer with no prepaid balance, or one wei short of the fee', async () => {
    const current = await requirements();
    const empty = Wallet.createRandom();
    const emptyRefusal = await refused(await paymentSignatureFor(empty, current));
    expect(emptyRefusal.code).toBe(PaymentRefusalCode.INSUFFICIENT_FUNDS);
    expect(emptyRefusal.payer?.hex).toBe(empty.address);

    const short = await payer(MODEL.feeWei - 1n);
    const shortRefusal = await refused(await paymentSignatureFor(short, current));
    expect(shortRefusal.code).toBe(PaymentRefusalCode.INSUFFICIENT_FUNDS);
    expect(shortRefusal.payer?.hex).toBe(short.address);

    // Exactly the fee is enough.
    await expectVerifies(await paymentSignatureFor(await payer(MODEL.feeWei), current));
  });

  it('passes a payment that fails no check, reporting what it reserved', async () => {
    const wallet = await payer();
    const current = await requirements();
    const deadline = BigInt(nowSeconds() + 120);
    const nonce = `0x${'ab'.repeat(32)}`;
    const before = Date.now();
    const verified = verifiedOf(
      await verify(settler.client, await paymentSignatureFor(wallet, current, { deadline, nonce }), {
        reservationTtlMs: 60_000,
      }),
    );
    try {
      expect(verified.reservationId).not.toBe('');
      expect(verified.payer?.hex).toBe(wallet.address);
      expect(verified.nonce?.hex).toBe(nonce);
      expect(verified.amountWei?.decimal).toBe(MODEL.feeWei.toString());
      expect(verified.maxAmountWei?.decimal).toBe(MODEL.feeWei.toString());
      expect(verified.network).toBe(`eip155:${devnet().anvil.chainId}`);
      expect(verified.deadline?.seconds).toBe(deadline);
      const expiresAtMs = Number(verified.reservationExpiresAt!.seconds) * 1000;
      expect(expiresAtMs).toBeGreaterThanOrEqual(before + 60_000 - 1000);
      expect(expiresAtMs).toBeLessThanOrEqual(Date.now() + 60_000);
    } finally {
      await settler.client.releasePayment({ reservationId: verified.reservationId });
    }
  });
});

describe('when two checks fail, the earlier one in the table decides', () => {
  let current: PrepaidDebitRequirements;
  beforeAll(async () => {
    current = await requirements();
  });

  it('2 before 3: version 1 and scheme exact → invalid_x402_version', async () => {
    const good = await signPayment(await payer(), current);
    const refusal = await refused(
      header({ ...good, accepted: { ...current, scheme: 'exact' }, x402Version: 1 }),
    );
    expect(refusal.code).toBe(PaymentRefusalCode.INVALID_X402_VERSION);
  });

  it('3 before 4: scheme exact on another network → unsupported_scheme', async () => {
    const good = await signPayment(await payer(), current);
    const refusal = await refused(
      header(withAccepted(good, { ...current, scheme: 'exact', network: 'eip155:1' })),
    );
    expect(refusal.code).toBe(PaymentRefusalCode.UNSUPPORTED_SCHEME);
  });

  it('4 before 5: another network and another amount → invalid_network', async () => {
    const good = await signPayment(await payer(), current);
    const refusal = await refused(
      header(withAccepted(good, { ...current, network: 'eip155:1', amount: '1' })),
    );
    expect(refusal.code).toBe(PaymentRefusalCode.INVALID_NETWORK);
  });

  it('5 before 6: a tampered amount and a passed deadline → invalid_payment_requirements', async () => {
    const expired = await signedPayload(await payer(), current, { deadline: String(nowSeconds() - 60) });
    const refusal = await refused(header(withAccepted(expired, { ...current, amount: '1' })));
    expect(refusal.code).toBe(PaymentRefusalCode.INVALID_PAYMENT_REQUIREMENTS);
  });

  it('6 before 7: expired and naming another facilitator → expired', async () => {
    const payment = await signedPayload(await payer(), current, {
      deadline: String(nowSeconds() - 60),
      facilitator: stranger().address,
    });
    expect((await refused(header(payment))).code).toBe(PaymentRefusalCode.EXPIRED);
  });

  it('7 before 8: another facilitator and another payTo → facilitator_mismatch', async () => {
    const payment = await signedPayload(await payer(), current, {
      facilitator: stranger().address,
      payTo: devnet().wallet(ACCOUNTS.otherPayTo).address,
    });
    expect((await refused(header(payment))).code).toBe(PaymentRefusalCode.FACILITATOR_MISMATCH);
  });

  it('8 before 9: another payTo while the facilitator is not authorized → recipient_mismatch', async () => {
    const payment = await signedPayload(await payer(), current, {
      payTo: devnet().wallet(ACCOUNTS.otherPayTo).address,
    });
    await withFacilitatorRevoked(async () => {
      expect((await refused(header(payment))).code).toBe(PaymentRefusalCode.RECIPIENT_MISMATCH);
    });
  });

  it('9 before 10: the facilitator not authorized and the nonce held → facilitator_not_authorized', async () => {
    const paymentSignature = await paymentSignatureFor(await payer(), current);
    const held = verifiedOf(await verify(settler.client, paymentSignature));
    try {
      await withFacilitatorRevoked(async () => {
        expect((await refused(paymentSignature)).code).toBe(PaymentRefusalCode.FACILITATOR_NOT_AUTHORIZED);
      });
      expect((await refused(paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);
    } finally {
      await settler.client.releasePayment({ reservationId: held.reservationId });
    }
  });

  it('10 before 11: the nonce held and a signature by another wallet → nonce_used', async () => {
    const wallet = await payer();
    const held = verifiedOf(await verify(settler.client, await paymentSignatureFor(wallet, current)));
    try {
      const forged = await signedPayload(wallet, current, { nonce: held.nonce!.hex }, { signer: stranger() });
      expect((await refused(header(forged))).code).toBe(PaymentRefusalCode.NONCE_USED);
    } finally {
      await settler.client.releasePayment({ reservationId: held.reservationId });
    }
  });

  it('11 before 12: a bad signature and a cap below the fee → signature', async () => {
    const payment = await signedPayload(
      await payer(),
      current,
      { maxAmount: '1' },
      { signer: Wallet.createRandom() },
    );
    expect((await refused(header(payment))).code).toBe(PaymentRefusalCode.SIGNATURE_INVALID);
  });

  it('12 before 13: a cap below the fee from a payer with no balance → over_cap', async () => {
    const payment = await paymentSignatureFor(Wallet.createRandom(), current, { maxAmount: 1n });
    expect((await refused(payment)).code).toBe(PaymentRefusalCode.OVER_CAP);
  });

  it('6 before everything after it: expired, foreign facilitator and payTo, forged, over cap, unfunded → expired', async () => {
    const payment = await signedPayload(
      Wallet.createRandom(),
      current,
      {
        deadline: String(nowSeconds() - 60),
        facilitator: stranger().address,
        payTo: devnet().wallet(ACCOUNTS.otherPayTo).address,
        maxAmount: '1',
      },
      { signer: Wallet.createRandom() },
    );
    expect((await refused(header(payment))).code).toBe(PaymentRefusalCode.EXPIRED);
  });
});
