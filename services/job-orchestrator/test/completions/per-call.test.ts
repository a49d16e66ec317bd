import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { parseEther } from 'ethers';
import { SessionState } from '@svc/chain';
import { OPEN_SESSIONS_GROUP } from '../../src/sessions/session-records.js';
import { MemoryStore } from '@svc/platform';
import { JobLifecycleKind, PaymentPath } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import {
  PaymentRefusalCode,
  PaymentReservationState,
} from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { useDevnet, waitUntil } from '@svc/testkit';
import { deterministicAnswer } from '@svc/worker';
import {
  completionOf,
  deliveredText,
  failureOf,
  prepareServiceAccounts,
  preparePerCallAccounts,
  SERVICE_ACCOUNTS,
  shapeOf,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import {
  depositedWallet,
  runPaid,
  signedPayment,
  verifiedPayment,
  verify,
  type VerifiedPayment,
} from '../support/per-call-payments.js';
import { RpcFaultProxy } from '../support/rpc-fault-proxy.js';

// Per-call payments end to end below the gateway: real wallets sign real authorizations, the settler
// verifies and settles them on anvil (reaching the chain through a proxy that can lose receipts), and
// reference workers answer the jobs.
const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, accounts: 14 });
const store = new MemoryStore();
let proxy: RpcFaultProxy;
let stack: CompletionStack;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  await preparePerCallAccounts(devnet());
  proxy = await RpcFaultProxy.start(devnet().anvil.rpcUrl);
  stack = await startCompletionStack(devnet(), {
    store,
    perCall: { rpcUrl: proxy.url },
    // Short, so a call gives up within a test: its listed rechecks (about 12 s) are always made.
    env: { SETTLEMENT_OUTCOME_WAIT: '4s' },
  });
  await stack.startWorker();
  await stack.startWorker();
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await proxy?.close();
  await store.close();
});

// A test that fails inside an outage it set must not leave the next one without a chain.
afterEach(() => chainReachableAgain(), 40_000);

const payer = (deposit?: bigint) => depositedWallet(devnet(), deposit);
const verified = (paymentSignature: string) => verifiedPayment(stack, paymentSignature);
const run = (payment: VerifiedPayment, content: string) => runPaid(stack, payment, content);

/**
 * Waits until the settler reaches the chain again. The settler answers at broadcast and the worker starts
 * at once, so a call may be answered inside an outage the proxy set for its settlement; a payment verified
 * after it needs the chain.
 */
async function chainReachableAgain(): Promise<void> {
  const blockNumber = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_blockNumber', params: [] });
  await waitUntil(
    () =>
      fetch(proxy.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: blockNumber })
        .then((answer) => answer.ok)
        .catch(() => false),
    (reachable) => reachable,
    { what: 'the settler reaching the chain again', timeoutMs: 30_000 },
  );
}

function refusalCode(outcome: Awaited<ReturnType<typeof verify>>): PaymentRefusalCode | undefined {
  return outcome.case === 'refused' ? outcome.value.code : undefined;
}

/**
 * The same PAYMENT-SIGNATURE sent again after its job was answered: the settler lets it go on under the
 * reservation that settled it (idempotent by the nonce), and the orchestrator refuses it as used before
 * anything runs. What the client sees: `invalid_prepaid_debit_payload_nonce_used`, nothing submitted.
 */
async function resendRefusedAsUsed(header: string, reservationId: string): Promise<void> {
  const outcome = await verify(stack, header);
  if (outcome.case === 'refused') {
    expect(outcome.value.code).toBe(PaymentRefusalCode.NONCE_USED);
    return;
  }
  expect(outcome.case === 'verified' && outcome.value.reservationId).toBe(reservationId);
  const events = await run(await verified(header), 'sent again');
  expect(shapeOf(events)).toEqual(['failed']);
  expect(failureOf(events)).toMatchObject({
    error: { code: 'invalid_prepaid_debit_payload_nonce_used' },
    jobSubmitted: false,
  });
}

describe('a call paid per call', () => {
  it("settles in a session the service owns: the payer is debited exactly the fee, by the facilitator's operator", async () => {
    const wallet = await payer();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const header = await signedPayment(stack, wallet);
    const payment = await verified(header);
    expect(payment).toMatchObject({ payer: wallet.address, amountWei: MODEL.feeWei });

    const events = await run(payment, 'paid per call');
    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    const completed = completionOf(events)!;
    expect(deliveredText(events)).toBe(deterministicAnswer([{ role: 'user', content: 'paid per call' }]));
    expect(BigInt(completed.chargedWei!.decimal)).toBe(MODEL.feeWei);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);

    // The settlement is the job's submission, sent by the facilitator's operator into the service's session.
    const settlement = await devnet().provider.getTransaction(completed.service!.txHash!.hex);
    expect(settlement?.from).toBe(devnet().wallet(SERVICE_ACCOUNTS.facilitatorOperator).address);
    const job = await stack.chain.getJob(BigInt(completed.service!.jobId));
    expect(job.payer).toBe(wallet.address);
    expect((await stack.chain.getSession(job.sessionId)).owner).toBe(stack.signer);

    await waitUntil(
      async () => stack.events.filter((event) => event.reservationId === payment.reservationId),
      (events) => events.some((event) => event.kind === JobLifecycleKind.ANSWERED),
      { what: 'the answered event', timeoutMs: 10_000 },
    );
    const settled = stack.events.find(
      (event) =>
        event.reservationId === payment.reservationId && event.kind === JobLifecycleKind.PAYMENT_SETTLED,
    );
    expect(settled).toMatchObject({
      paymentPath: PaymentPath.PREPAID_DEBIT,
      paymentReservationId: payment.reservationId,
      jobId: completed.service!.jobId,
      feeWei: { decimal: MODEL.feeWei.toString() },
    });
    expect(settled?.payer?.hex).toBe(wallet.address);

    // Spent for good: the same payment is refused as used, and its reservation cannot be freed.
    await resendRefusedAsUsed(header, payment.reservationId);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
    const release = await stack.settler!.releasePayment({ reservationId: payment.reservationId });
    expect(release.state).toBe(PaymentReservationState.SETTLED);
  });

  it('is held for one call: of concurrent verifications of one payment exactly one passes, and a release frees it', async () => {
    const wallet = await payer();
    const header = await signedPayment(stack, wallet);
    const outcomes = await Promise.all(Array.from({ length: 6 }, () => verify(stack, header)));
    const passed = outcomes.filter((outcome) => outcome.case === 'verified');
    expect(passed).toHaveLength(1);
    expect(outcomes.filter((outcome) => refusalCode(outcome) === PaymentRefusalCode.NONCE_USED)).toHaveLength(
      5,
    );

    const reservationId = passed[0]!.case === 'verified' ? passed[0]!.value.reservationId : '';
    const release = await stack.settler!.releasePayment({ reservationId });
    expect(release.state).toBe(PaymentReservationState.RELEASED);
    const again = await verified(header);
    expect(again.reservationId).not.toBe(reservationId);
    await stack.settler!.releasePayment({ reservationId: again.reservationId });
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(parseEther('1'));
  });

  it('whose receipt is lost in transit is found on chain: answered, charged once, and refused as used after', async () => {
    const wallet = await payer();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const header = await signedPayment(stack, wallet);
    const payment = await verified(header);
    const lostBefore = proxy.lost;
    proxy.loseReceipts(1);

    const events = await run(payment, 'receipt lost');
    expect(proxy.lost).toBe(lostBefore + 1);
    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
    await resendRefusedAsUsed(header, payment.reservationId);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
  });

  it('whose settlement the settler lost track of is found by asking again: answered and charged once', async () => {
    const wallet = await payer();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const header = await signedPayment(stack, wallet);
    const payment = await verified(header);
    // The settlement is mined, then the settler loses the chain for a moment: no receipt, no lookup.
    proxy.outageAfterBroadcast(1_200);

    const events = await run(payment, 'chain went away briefly');
    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
    await chainReachableAgain();
    await resendRefusedAsUsed(header, payment.reservationId);
  });

  it('whose settlement stays unknown for a while (a slow chain) is waited for and answered, charged once', async () => {
    const wallet = await payer();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const header = await signedPayment(stack, wallet);
    const payment = await verified(header);
    // Far longer than the few seconds the orchestrator used to ask again for before answering 502: the
    // settlement lands while it waits, and the call must be served, never answered 502 with the payer debited.
    proxy.outageAfterBroadcast(8_000);

    const events = await run(payment, 'chain went away');
    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    expect(deliveredText(events)).toBe(deterministicAnswer([{ role: 'user', content: 'chain went away' }]));
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
    // Sent again: refused as used, never charged twice.
    await chainReachableAgain();
    await resendRefusedAsUsed(header, payment.reservationId);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
  }, 60_000);

  it('broadcast into a chain outage is answered by its worker before it lands, charged once when it lands, and refused as used after', async () => {
    const wallet = await payer();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const header = await signedPayment(stack, wallet);
    const payment = await verified(header);
    // The node takes the settlement, then the settler loses the chain (its answer to the broadcast too):
    // the worker was handed the signed settlement already, so the call is answered all the same.
    proxy.outageAfterBroadcast(8_000, { loseAnswer: true });
    const events = await run(payment, 'answered in the dark');
    expect(shapeOf(events)).toEqual(['started', 'delta', 'completed']);
    expect(deliveredText(events)).toBe(
      deterministicAnswer([{ role: 'user', content: 'answered in the dark' }]),
    );
    // Charged once the settlement is seen landed (the settler reaches the chain again).
    await chainReachableAgain();
    await waitUntil(
      () => stack.chain.prepaidBalanceOf(wallet.address),
      (balance) => before - balance === MODEL.feeWei,
      { what: 'the settlement debited', timeoutMs: 30_000 },
    );
    const [settlement] = await stack.chain.jobRegistry.queryFilter(
      stack.chain.jobRegistry.filters.DebitSettled(wallet.address),
    );
    expect(completionOf(events)!.service!.jobId).toBe(settlement!.args.jobId.toString());
    await waitUntil(
      async () => stack.events.filter((event) => event.reservationId === payment.reservationId),
      (seen) => seen.some((event) => event.kind === JobLifecycleKind.ANSWERED),
      { what: 'the answered event', timeoutMs: 30_000 },
    );
    await resendRefusedAsUsed(header, payment.reservationId);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
  }, 120_000);

  it('refused by the chain at settlement fails unsubmitted with its code, frees the payment and debits nothing', async () => {
    // Enough for one job: two payments both verify, the first to settle takes the balance.
    const wallet = await payer(MODEL.feeWei);
    const first = await verified(await signedPayment(stack, wallet));
    const secondHeader = await signedPayment(stack, wallet);
    const second = await verified(secondHeader);

    expect(shapeOf(await run(first, 'first'))).toEqual(['started', 'delta', 'completed']);
    const events = await run(second, 'second');
    expect(shapeOf(events)).toEqual(['failed']);
    expect(failureOf(events)).toMatchObject({ error: { code: 'insufficient_funds' }, jobSubmitted: false });
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(0n);
    // Freed: verified anew it is refused for the balance, not as used.
    expect(refusalCode(await verify(stack, secondHeader))).toBe(PaymentRefusalCode.INSUFFICIENT_FUNDS);
  });

  it('that landed with no call to serve it is adopted by the job keeper, to be timed out and refunded like any orphan', async () => {
    // A settlement no call tracks: as when the settler answered and the orchestrator's replica died.
    const wallet = await payer();
    const payment = await verified(await signedPayment(stack, wallet));
    let sessionId: bigint | undefined;
    for (const entry of await store.presence.list(OPEN_SESSIONS_GROUP)) {
      const session = await stack.chain.getSession(BigInt(entry.member));
      if (session.owner === stack.signer && session.state === SessionState.Active)
        sessionId = session.sessionId;
    }
    expect(sessionId).toBeDefined();
    const settled = await stack.settlerAsOrchestrator!.settlePayment({
      reservationId: payment.reservationId,
      sessionId: sessionId!.toString(),
      promptWire: new Uint8Array(64),
      requestId: 'orphan',
    });
    expect(settled.outcome.case).toBe('settled');
    const jobId = settled.outcome.case === 'settled' ? settled.outcome.value.jobId : '';
    const tracked = await waitUntil(
      async () => (await store.presence.list('jobs:tracked')).find((entry) => entry.member === jobId),
      (entry) => entry !== undefined,
      { what: 'the adopted job', timeoutMs: 10_000 },
    );
    expect(JSON.parse(tracked!.value)).toMatchObject({ paymentPath: 'prepaid_debit', payer: wallet.address });
  });
});
