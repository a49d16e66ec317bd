import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { hexlify, keccak256, parseEther, Transaction } from 'ethers';
import { commitmentOf, encodeBlob, SessionKeyPair, versionedHash } from '@svc/chain';
import {
  connectJobRegistry,
  connectWorkerRegistry,
  DEFAULT_STAKING_PARAMETERS,
  modelIdOf,
} from '@svc/contracts';
import { MemoryStore } from '@svc/platform';
import { GrpcStatus } from '@svc/proto';
import {
  PaymentRefusalCode,
  PaymentReservationState,
  type PaymentBroadcast,
  type SettlePaymentResponse,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { sampleValue, scrape, useDevnet, waitUntil } from '@svc/testkit';
import { paymentSignatureFor } from '@svc/x402';
import {
  ACCOUNTS,
  currentRequirements,
  DEPLOYED_MODELS,
  depositedWallet,
  MODEL,
  perCallEnv,
  preparePerCallAccounts,
  REPRICED_MODEL,
  rpcErrorOf,
  startSettler,
  verifiedOf,
  verify,
  type Settler,
} from './support/settler.js';

// Settlements on anvil into a session the service signer owns, claimed by a registered worker: mining is
// paused where a test needs the settlement broadcast and not yet mined.
const devnet = useDevnet({ models: DEPLOYED_MODELS, accounts: 14, warmBlobs: true });
const store = new MemoryStore();
/** The worker that claims the service's sessions (a dev account the settler's suites leave unused). */
const WORKER = 2;
let settler: Settler;

beforeAll(async () => {
  await preparePerCallAccounts(devnet());
  const workers = connectWorkerRegistry(devnet().deployment.workerRegistryAddress, devnet().wallet(WORKER));
  await (
    await workers.register([MODEL.name, REPRICED_MODEL.name].map(modelIdOf), {
      value: DEFAULT_STAKING_PARAMETERS.minStakeWei,
    })
  ).wait();
  settler = await startSettler(devnet(), store, perCallEnv(devnet()));
}, 60_000);

afterAll(async () => {
  await settler?.stop();
  await store.close();
});

const registryAs = (account: number) =>
  connectJobRegistry(devnet().deployment.jobRegistryAddress, devnet().wallet(account));

/** A session of the service signer (the payments' payTo) for `model`, claimed by the worker. */
async function activeSession(model = MODEL.name): Promise<bigint> {
  const signer = devnet().wallet(ACCOUNTS.signer);
  const receipt = await (
    await registryAs(ACCOUNTS.signer).openSession(
      signer.address,
      modelIdOf(model),
      devnet().wallet(WORKER).address,
    )
  ).wait();
  const opened = receipt!.logs
    .map((log) => registryAs(ACCOUNTS.signer).interface.parseLog(log))
    .find((parsed) => parsed?.name === 'SessionOpened');
  const sessionId = opened!.args.sessionId as bigint;
  await (await registryAs(WORKER).claimSession(sessionId, SessionKeyPair.generate().publicKey)).wait();
  return sessionId;
}

/** A payment of a fresh wallet, verified and held; its reservation id and payer. */
async function heldPayment(model = MODEL.name, deposit?: bigint) {
  const wallet = await depositedWallet(devnet(), deposit);
  const header = await paymentSignatureFor(wallet, await currentRequirements(settler.client, model));
  return { wallet, reservationId: verifiedOf(await verify(settler.client, header, { model })).reservationId };
}

const PROMPT_WIRE = new Uint8Array([7, 7, 7, 1, 2, 3]);

function settle(reservationId: string, sessionId: bigint, answerAtBroadcast: boolean) {
  return settler.asOrchestrator.settlePayment({
    reservationId,
    sessionId: sessionId.toString(),
    promptWire: PROMPT_WIRE,
    requestId: 'settle-payment-test',
    answerAtBroadcast,
  });
}

function broadcastOf(response: SettlePaymentResponse): PaymentBroadcast {
  const { outcome } = response;
  if (outcome.case !== 'broadcast') throw new Error(`expected a broadcast settlement, got ${outcome.case}`);
  return outcome.value;
}

/** Runs `body` with anvil's automining off (transactions wait in the pool until `evm_mine`). */
async function withMiningPaused<T>(body: () => Promise<T>): Promise<T> {
  await devnet().rpc('evm_setAutomine', [false]);
  try {
    return await body();
  } finally {
    await devnet().rpc('evm_setAutomine', [true]);
  }
}

/** Asks again (no flag) until the settlement is no longer under way, as the job-orchestrator does. */
async function settledOutcome(reservationId: string, sessionId: bigint) {
  const response = await waitUntil(
    () => settle(reservationId, sessionId, false).catch(() => undefined),
    (answer) => answer !== undefined,
    { what: 'the settlement to be known', timeoutMs: 10_000, intervalMs: 50 },
  );
  return response!.outcome;
}

describe('SettlePayment answering at broadcast', () => {
  it('answers broadcast before the block is mined; asked again it is in flight, then settled with the same job and transaction, debited once', async () => {
    const { wallet, reservationId } = await heldPayment();
    const sessionId = await activeSession();
    const balance = await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address);
    const settlements = async (outcome: string, code?: string) =>
      sampleValue(await scrape(settler.running.metricsUrl!), 'svc_payment_settler_settlements_total', {
        outcome,
        ...(code ? { code } : {}),
      }) ?? 0;
    const before = {
      inFlight: await settlements('in_flight'),
      errors: await settlements('error', 'unexpected_settle_error'),
      settled: await settlements('settled'),
    };

    const announced = await withMiningPaused(async () => {
      const blockBefore = await devnet().provider.getBlockNumber();
      const broadcast = broadcastOf(await settle(reservationId, sessionId, true));
      // Signed and answered; sent once its blob's proof is computed, and not mined: no receipt, no new
      // block, nothing debited yet.
      await waitUntil(
        () => devnet().provider.getTransaction(broadcast.txHash!.hex),
        (sent) => sent !== null,
        { what: "the settlement in the node's pool", timeoutMs: 10_000, intervalMs: 50 },
      );
      expect(await devnet().provider.getTransactionReceipt(broadcast.txHash!.hex)).toBeNull();
      expect(await devnet().provider.getBlockNumber()).toBe(blockBefore);
      expect(await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address)).toBe(balance);
      expect(broadcast.jobId).toBe(((sessionId << 32n) | 1n).toString());
      expect(BigInt(broadcast.amountWei!.decimal)).toBe(MODEL.feeWei);

      // The send goes on under the reservation's lock: a repeat (with the flag or without) is told it is
      // under way, sends nothing, and a release keeps the payment held.
      for (const flag of [false, true]) {
        const inFlight = await rpcErrorOf(settle(reservationId, sessionId, flag));
        expect({ status: inFlight.status, appCode: inFlight.appCode }).toEqual({
          status: GrpcStatus.UNAVAILABLE,
          appCode: 'unexpected_settle_error',
        });
      }
      expect((await settler.client.releasePayment({ reservationId })).state).toBe(
        PaymentReservationState.HELD,
      );
      await devnet().rpc('evm_mine');
      return broadcast;
    });

    const outcome = await settledOutcome(reservationId, sessionId);
    if (outcome.case !== 'settled') throw new Error(`expected settled, got ${outcome.case}`);
    expect(outcome.value.jobId).toBe(announced.jobId);
    expect(outcome.value.txHash?.hex).toBe(announced.txHash?.hex);
    expect(outcome.value.amountWei?.decimal).toBe(announced.amountWei?.decimal);
    expect(outcome.value.promptBlobHash?.hex).toBe(versionedHash(announced.kzgCommitment));
    expect(balance - (await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address))).toBe(
      MODEL.feeWei,
    );
    // The asks made while it was under way are counted as such, not as errors (no alert for the fast path).
    expect(await settlements('in_flight')).toBeGreaterThanOrEqual(before.inFlight + 2);
    expect(await settlements('error', 'unexpected_settle_error')).toBe(before.errors);
    expect(await settlements('settled')).toBeGreaterThanOrEqual(before.settled + 1);
    // Asked once more, with the flag too: the same settlement, nothing sent again.
    const again = await settle(reservationId, sessionId, true);
    expect(again.outcome.case === 'settled' && again.outcome.value.txHash?.hex).toBe(announced.txHash?.hex);
    expect(balance - (await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address))).toBe(
      MODEL.feeWei,
    );
  });

  it("hands over a transaction that parses: type 3, submitJobWithDebit of this session, job and payment, sent by the facilitator's operator, its one blob the returned commitment's", async () => {
    const { wallet, reservationId } = await heldPayment();
    const sessionId = await activeSession();
    const broadcast = broadcastOf(await settle(reservationId, sessionId, true));

    const signed = hexlify(broadcast.signedTransaction);
    const tx = Transaction.from(signed);
    expect(tx.type).toBe(3);
    expect(tx.hash).toBe(broadcast.txHash?.hex);
    expect(keccak256(signed)).toBe(broadcast.txHash?.hex);
    expect(tx.chainId).toBe(BigInt(devnet().anvil.chainId));
    expect(tx.to).toBe(devnet().deployment.jobRegistryAddress);
    expect(tx.blobs).toBeNull();
    expect(broadcast.kzgCommitment).toHaveLength(48);
    expect(tx.blobVersionedHashes).toEqual([versionedHash(broadcast.kzgCommitment)]);
    expect(
      Buffer.from(commitmentOf(encodeBlob(PROMPT_WIRE))).equals(Buffer.from(broadcast.kzgCommitment)),
    ).toBe(true);

    const call = devnet().deployment.jobRegistry.interface.parseTransaction({ data: tx.data });
    expect(call?.name).toBe('submitJobWithDebit');
    expect(call?.args[0]).toBe(sessionId);
    expect(call?.args[1].toString()).toBe(broadcast.jobId);
    expect(call?.args[2].payer).toBe(wallet.address);

    // Sent by an operator of the facilitator, which the session owner (payTo) authorized as its delegate:
    // the only senders the contract lets settle into the service's sessions.
    const operator = devnet().wallet(ACCOUNTS.facilitatorOperator).address;
    const facilitator = devnet().wallet(ACCOUNTS.facilitator).address;
    expect(tx.from).toBe(operator);
    expect(await devnet().deployment.jobRegistry.principalOf(operator)).toBe(facilitator);
    const session = await devnet().deployment.jobRegistry.getSession(sessionId);
    expect(session.owner).toBe(devnet().wallet(ACCOUNTS.signer).address);
    expect(await devnet().deployment.jobRegistry.isDelegateAuthorized(session.owner, facilitator)).toBe(true);

    const outcome = await settledOutcome(reservationId, sessionId);
    expect(outcome.case === 'settled' && outcome.value.txHash?.hex).toBe(broadcast.txHash?.hex);
  });

  it('without the flag answers only once the block is mined, as it always did', async () => {
    const { reservationId } = await heldPayment();
    const sessionId = await activeSession();
    await withMiningPaused(async () => {
      let answered = false;
      const settling = settle(reservationId, sessionId, false).finally(() => (answered = true));
      const operator = devnet().wallet(ACCOUNTS.facilitatorOperator).address;
      const mined = await devnet().provider.getTransactionCount(operator, 'latest');
      await waitUntil(
        () => devnet().provider.getTransactionCount(operator, 'pending'),
        (pending) => pending > mined,
        { what: 'the settlement in the pool', timeoutMs: 10_000, intervalMs: 20 },
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered).toBe(false);
      await devnet().rpc('evm_mine');
      const { outcome } = await settling;
      expect(outcome.case).toBe('settled');
    });
  });

  it('a stopping settler lets the settlements it answered at broadcast finish: the next replica finds them settled', async () => {
    const { reservationId } = await heldPayment();
    const sessionId = await activeSession();
    const stopping = await startSettler(devnet(), store, perCallEnv(devnet()));
    await withMiningPaused(async () => {
      const { outcome } = await stopping.asOrchestrator.settlePayment({
        reservationId,
        sessionId: sessionId.toString(),
        promptWire: PROMPT_WIRE,
        requestId: 'settle-payment-test',
        answerAtBroadcast: true,
      });
      expect(outcome.case).toBe('broadcast');
      let stopped = false;
      const stop = stopping.stop().then(() => (stopped = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(stopped).toBe(false);
      await devnet().rpc('evm_mine');
      await stop;
    });
    const outcome = await settledOutcome(reservationId, sessionId);
    expect(outcome.case).toBe('settled');
  });

  it('refused by the chain after its broadcast (the fee rose above the cap in its block): the next ask hears that refusal, and the payment is freed', async () => {
    const { wallet, reservationId } = await heldPayment(REPRICED_MODEL.name);
    const sessionId = await activeSession(REPRICED_MODEL.name);
    const balance = await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address);
    try {
      await withMiningPaused(async () => {
        broadcastOf(await settle(reservationId, sessionId, true));
        // The owner raises the fee with a higher tip: mined first in the same block, so the settlement
        // reverts with FeeAboveMax, after its caller was answered.
        await registryAs(ACCOUNTS.owner).setModel(REPRICED_MODEL.name, REPRICED_MODEL.feeWei * 2n, {
          maxPriorityFeePerGas: parseEther('0.00001'),
          maxFeePerGas: parseEther('0.0001'),
        });
        await devnet().rpc('evm_mine');
      });

      const outcome = await settledOutcome(reservationId, sessionId);
      if (outcome.case !== 'refused') throw new Error(`expected refused, got ${outcome.case}`);
      expect(outcome.value.code).toBe(PaymentRefusalCode.OVER_CAP);
      expect(await devnet().deployment.jobRegistry.prepaidBalanceOf(wallet.address)).toBe(balance);
      expect((await settler.client.releasePayment({ reservationId })).state).toBe(
        PaymentReservationState.RELEASED,
      );
    } finally {
      await (await registryAs(ACCOUNTS.owner).setModel(REPRICED_MODEL.name, REPRICED_MODEL.feeWei)).wait();
    }
  });
});
