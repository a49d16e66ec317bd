import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MaxUint256 } from 'ethers';
import { MemoryStore } from '@svc/platform';
import { GrpcStatus } from '@svc/proto';
import {
  PaymentRefusalCode,
  PaymentReservationState,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { sampleValue, scrape, useDevnet } from '@svc/testkit';
import { paymentSignatureFor } from '@svc/x402';
import {
  ACCOUNTS,
  currentRequirements,
  DEPLOYED_MODELS,
  depositedWallet,
  perCallEnv,
  preparePerCallAccounts,
  refusalOf,
  rpcErrorOf,
  startSettler,
  verifiedOf,
  verify,
  type Settler,
} from './support/settler.js';

// Nonce reservations: two settler replicas share one store, as replicas share Redis in a deployment, and
// concurrent verifications of one payment race for its nonce for real.
const devnet = useDevnet({ models: DEPLOYED_MODELS, accounts: 14 });
const store = new MemoryStore();
let first: Settler;
let second: Settler;

beforeAll(async () => {
  await preparePerCallAccounts(devnet());
  first = await startSettler(devnet(), store, perCallEnv(devnet()));
  second = await startSettler(devnet(), store, perCallEnv(devnet()));
}, 60_000);

afterAll(async () => {
  await first?.stop();
  await second?.stop();
  await store.close();
});

const payer = () => depositedWallet(devnet());

async function signedPayment(): Promise<string> {
  return paymentSignatureFor(await payer(), await currentRequirements(first.client));
}

function settle(settler: Settler, reservationId: string, sessionId = '1') {
  return settler.asOrchestrator.settlePayment({
    reservationId,
    sessionId,
    promptWire: new Uint8Array([1, 2, 3]),
    requestId: 'payment-settler-test',
  });
}

/** The refusal a settlement must end in. */
async function settleRefusal(settler: Settler, reservationId: string) {
  const { outcome } = await settle(settler, reservationId);
  if (outcome.case !== 'refused') throw new Error(`expected a refused settlement, got ${outcome.case}`);
  return outcome.value;
}

/** How many transactions the facilitator and its operator ever sent: settlement sends nothing else. */
async function settlementsSent(): Promise<number> {
  const counts = await Promise.all(
    [ACCOUNTS.facilitator, ACCOUNTS.facilitatorOperator].map((index) =>
      devnet().provider.getTransactionCount(devnet().wallet(index).address, 'latest'),
    ),
  );
  return counts[0]! + counts[1]!;
}

describe('a payment verified concurrently', () => {
  it('of 10 concurrent verifications across two replicas exactly one passes and nine are nonce_used; released, it passes again', async () => {
    const paymentSignature = await signedPayment();
    const outcomes = await Promise.all(
      Array.from({ length: 10 }, (_, call) =>
        verify((call % 2 === 0 ? first : second).client, paymentSignature),
      ),
    );
    const passed = outcomes.filter((outcome) => outcome.case === 'verified');
    expect(passed).toHaveLength(1);
    const refusals = outcomes.filter((outcome) => outcome.case === 'refused').map(refusalOf);
    expect(refusals.map((refusal) => refusal.code)).toEqual(Array(9).fill(PaymentRefusalCode.NONCE_USED));
    const held = verifiedOf(passed[0]!);
    for (const refusal of refusals) expect(refusal.payer?.hex).toBe(held.payer?.hex);

    // Still held: a later verification on either replica is refused too.
    expect(refusalOf(await verify(first.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);
    expect(refusalOf(await verify(second.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);

    // Freed on the other replica than the one that may have reserved it: the same payment passes again.
    const released = await second.client.releasePayment({ reservationId: held.reservationId });
    expect(released.state).toBe(PaymentReservationState.RELEASED);
    const again = verifiedOf(await verify(first.client, paymentSignature));
    expect(again.reservationId).not.toBe(held.reservationId);
    expect(again.nonce?.hex).toBe(held.nonce?.hex);

    // Releasing the first reservation once more frees nothing: the new reservation keeps the nonce.
    expect((await first.client.releasePayment({ reservationId: held.reservationId })).state).toBe(
      PaymentReservationState.RELEASED,
    );
    expect(refusalOf(await verify(second.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);
    expect((await first.client.releasePayment({ reservationId: again.reservationId })).state).toBe(
      PaymentReservationState.RELEASED,
    );
    verifiedOf(await verify(second.client, paymentSignature));
  });

  it('of two different payments of one payer, both pass concurrently: nonces are held one by one', async () => {
    const wallet = await payer();
    const requirements = await currentRequirements(first.client);
    const payments = [
      await paymentSignatureFor(wallet, requirements),
      await paymentSignatureFor(wallet, requirements),
    ];
    const outcomes = await Promise.all([
      verify(first.client, payments[0]!),
      verify(second.client, payments[1]!),
    ]);
    const [a, b] = outcomes.map(verifiedOf);
    expect(a!.payer?.hex).toBe(wallet.address);
    expect(b!.payer?.hex).toBe(wallet.address);
    expect(a!.nonce?.hex).not.toBe(b!.nonce?.hex);
  });
});

describe('ReleasePayment', () => {
  it('of an unknown reservation is a no-op answered RELEASED', async () => {
    for (const reservationId of ['no-such-reservation', '', '00000000-0000-4000-8000-000000000000']) {
      const released = await first.client.releasePayment({ reservationId });
      expect(released.state).toBe(PaymentReservationState.RELEASED);
    }
  });

  it('frees only the reservation it names: another held payment stays held', async () => {
    const kept = await signedPayment();
    const freed = await signedPayment();
    const keptHeld = verifiedOf(await verify(first.client, kept));
    const freedHeld = verifiedOf(await verify(first.client, freed));
    expect((await first.client.releasePayment({ reservationId: freedHeld.reservationId })).state).toBe(
      PaymentReservationState.RELEASED,
    );
    expect(refusalOf(await verify(first.client, kept)).code).toBe(PaymentRefusalCode.NONCE_USED);
    verifiedOf(await verify(first.client, freed));
    await first.client.releasePayment({ reservationId: keptHeld.reservationId });
  });
});

describe('a payment sent again after its settlement was broadcast', () => {
  it('goes on under the reservation that settles it (its call gets that job), is not freed by a release, and another payment of the nonce stays refused', async () => {
    const header = await signedPayment();
    const held = verifiedOf(await verify(first.client, header));
    // The settlement was broadcast and its outcome lost (a slow chain): what the settler notes before sending.
    const recordKey = `payments:reservation:${held.reservationId}`;
    const record = JSON.parse((await store.values.get(recordKey))!) as Record<string, unknown>;
    await store.values.set(
      recordKey,
      JSON.stringify({ ...record, sentBlobHashes: ['0x01' + '00'.repeat(31)] }),
      60_000,
    );

    // The 502 told the client to send the same PAYMENT-SIGNATURE again: it is not refused as used, on any replica.
    for (const replica of [first, second]) {
      const again = verifiedOf(await verify(replica.client, header));
      expect(again.reservationId).toBe(held.reservationId);
    }
    // It may still land: a release keeps it held.
    expect((await first.client.releasePayment({ reservationId: held.reservationId })).state).toBe(
      PaymentReservationState.HELD,
    );
    verifiedOf(await verify(first.client, header));
    // Another payment (another signature) over the same nonce is still refused as used.
    const other = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as {
      payload: { signature: string };
    };
    const flipped =
      other.payload.signature.slice(0, -2) + (other.payload.signature.endsWith('1b') ? '1c' : '1b');
    other.payload.signature = flipped;
    const foreign = Buffer.from(JSON.stringify(other)).toString('base64');
    expect(refusalOf(await verify(first.client, foreign)).code).toBe(PaymentRefusalCode.NONCE_USED);
  });
});

describe('a reservation that lapses', () => {
  it('frees the nonce by itself after reservation_ttl; the lapsed id cannot settle, nor free the next holder', async () => {
    const paymentSignature = await signedPayment();
    const before = Date.now();
    const lapsing = verifiedOf(await verify(first.client, paymentSignature, { reservationTtlMs: 400 }));
    const expiresAtMs =
      Number(lapsing.reservationExpiresAt!.seconds) * 1000 + lapsing.reservationExpiresAt!.nanos / 1e6;
    expect(expiresAtMs).toBeGreaterThanOrEqual(before + 400);
    expect(expiresAtMs).toBeLessThanOrEqual(Date.now() + 400);
    expect(refusalOf(await verify(second.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);

    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expiresAtMs - Date.now()) + 100));
    const next = verifiedOf(await verify(second.client, paymentSignature));
    expect(next.reservationId).not.toBe(lapsing.reservationId);

    const sentBefore = await settlementsSent();
    const refusal = await settleRefusal(first, lapsing.reservationId);
    expect(refusal.code).toBe(PaymentRefusalCode.TRANSACTION_STATE);
    expect(await settlementsSent()).toBe(sentBefore);
    expect((await first.client.releasePayment({ reservationId: lapsing.reservationId })).state).toBe(
      PaymentReservationState.RELEASED,
    );
    expect(refusalOf(await verify(first.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);
    await second.client.releasePayment({ reservationId: next.reservationId });
  });
});

describe('SettlePayment refusals that need no session', () => {
  it('of an unknown reservation: refused invalid_transaction_state, nothing sent', async () => {
    const sentBefore = await settlementsSent();
    const refusal = await settleRefusal(first, 'no-such-reservation');
    expect(refusal.code).toBe(PaymentRefusalCode.TRANSACTION_STATE);
    expect(refusal.message).toMatch(/PAYMENT-SIGNATURE/);
    expect(await settlementsSent()).toBe(sentBefore);
  });

  it('of a released reservation: refused invalid_transaction_state, nothing sent, nothing debited', async () => {
    const wallet = await payer();
    const paymentSignature = await paymentSignatureFor(wallet, await currentRequirements(first.client));
    const held = verifiedOf(await verify(first.client, paymentSignature));
    await first.client.releasePayment({ reservationId: held.reservationId });
    const balance = await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address);
    const sentBefore = await settlementsSent();

    expect((await settleRefusal(second, held.reservationId)).code).toBe(PaymentRefusalCode.TRANSACTION_STATE);
    expect(await settlementsSent()).toBe(sentBefore);
    expect(await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address)).toBe(balance);
  });

  it('with a session_id that is no decimal uint256: INVALID_ARGUMENT invalid_request, nothing sent, the payment still held', async () => {
    const paymentSignature = await signedPayment();
    const held = verifiedOf(await verify(first.client, paymentSignature));
    const sentBefore = await settlementsSent();
    for (const sessionId of ['', 'abc', '-1', '0x1', '1.5', ' 1', '1'.repeat(79)]) {
      const error = await rpcErrorOf(settle(first, held.reservationId, sessionId));
      expect({ sessionId, status: error.status, appCode: error.appCode }).toEqual({
        sessionId,
        status: GrpcStatus.INVALID_ARGUMENT,
        appCode: 'invalid_request',
      });
    }
    expect(await settlementsSent()).toBe(sentBefore);
    expect(refusalOf(await verify(second.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);
    await first.client.releasePayment({ reservationId: held.reservationId });
  });
});

describe('a deadline far in the future', () => {
  // MaxUint256 ("never expires") is valid on chain; the gRPC Timestamp shows it as the last one it holds.
  it('verifies a payment whose deadline is MaxUint256, and frees it on release', async () => {
    const wallet = await payer();
    const paymentSignature = await paymentSignatureFor(wallet, await currentRequirements(first.client), {
      deadline: MaxUint256,
    });
    try {
      const held = verifiedOf(await verify(first.client, paymentSignature));
      expect(held.payer?.hex).toBe(wallet.address);
      expect(held.deadline?.seconds).toBe(253_402_300_799n);
      await first.client.releasePayment({ reservationId: held.reservationId });
    } finally {
      // Whatever happened above, the payment must not be left held.
      verifiedOf(await verify(second.client, paymentSignature));
    }
  });

  it('verifies a payment whose deadline is in a thousand years', async () => {
    const deadline = BigInt(Math.floor(Date.now() / 1000) + 1000 * 365 * 24 * 3600);
    const paymentSignature = await paymentSignatureFor(
      await payer(),
      await currentRequirements(first.client),
      {
        deadline,
      },
    );
    const held = verifiedOf(await verify(first.client, paymentSignature));
    expect(held.deadline?.seconds).toBe(deadline);
    await first.client.releasePayment({ reservationId: held.reservationId });
  });
});

describe('metrics', () => {
  it("count verifications and settlements by outcome and code, and the gRPC calls, on the runner's listener", async () => {
    const metricsUrl = first.running.metricsUrl!;
    const read = async (name: string, labels: Record<string, string>) =>
      sampleValue(await scrape(metricsUrl), name, labels) ?? 0;
    const VERIFICATIONS = 'svc_payment_settler_verifications_total';
    const SETTLEMENTS = 'svc_payment_settler_settlements_total';
    const nonceUsed = { outcome: 'refused', code: 'invalid_prepaid_debit_payload_nonce_used' };
    const lapsed = { outcome: 'refused', code: 'invalid_transaction_state' };
    const settleCalls = {
      grpc_service: 'svc.payment.v1.PaymentSettler',
      grpc_method: 'SettlePayment',
      grpc_code: 'OK',
    };
    const before = {
      verified: await read(VERIFICATIONS, { outcome: 'verified' }),
      nonceUsed: await read(VERIFICATIONS, nonceUsed),
      lapsed: await read(SETTLEMENTS, lapsed),
      timed: await read('svc_payment_settler_settle_seconds_count', { outcome: 'refused' }),
      settleCalls: await read('grpc_server_handled_total', settleCalls),
    };

    const paymentSignature = await signedPayment();
    verifiedOf(await verify(first.client, paymentSignature));
    expect(refusalOf(await verify(first.client, paymentSignature)).code).toBe(PaymentRefusalCode.NONCE_USED);
    await settleRefusal(first, 'no-such-reservation');

    expect(await read(VERIFICATIONS, { outcome: 'verified' })).toBe(before.verified + 1);
    expect(await read(VERIFICATIONS, nonceUsed)).toBe(before.nonceUsed + 1);
    expect(await read(SETTLEMENTS, lapsed)).toBe(before.lapsed + 1);
    expect(await read('svc_payment_settler_settle_seconds_count', { outcome: 'refused' })).toBe(
      before.timed + 1,
    );
    expect(await read('grpc_server_handled_total', settleCalls)).toBe(before.settleCalls + 1);
  });
});
