import { afterAll, beforeAll, beforeEach, describe, expect, it } from '@jest/globals';
import { JobState, SessionState } from '@svc/chain';
import { MemoryStore } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { useDevnet, waitUntil } from '@svc/testkit';
import { deterministicAnswer, restartedDeterministicAnswer } from '@svc/worker';
import { ChainSide } from '../support/chain-side.js';
import {
  completionOf,
  deliveredText,
  failureOf,
  preparePerCallAccounts,
  prepareServiceAccounts,
  retryOf,
  shapeOf,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { withDroppingFrames, type DroppingFrames } from '../support/dropping-frames.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { depositedWallet, runPaid, signedPayment, verifiedPayment } from '../support/per-call-payments.js';
import { RawLink } from '../support/raw-link.js';
import { fundedWallet, type ReferenceWorker } from '../support/reference-worker.js';
import { WorkerReputation } from '../../src/sessions/worker-reputation.js';
import { sessionPoolGroup } from '../../src/sessions/session-records.js';
import { connectJobRegistry, modelIdOf } from '@svc/contracts';
import { Interface, parseUnits } from 'ethers';

// A short claim window, so the unclaimed-session case takes seconds.
const devnet = useDevnet({
  models: DEPLOYED_MODELS,
  warmBlobs: true,
  accounts: 14,
  protocol: { claimWindowSeconds: 3 },
});
const memory = new MemoryStore();
let frames: DroppingFrames;
let stack: CompletionStack;
/** Fails every job before its first chunk; takes new sessions first (more free job slots). */
let faulty: ReferenceWorker;
/** Answers, unless a prompt asks it for a fault. */
let healthy: ReferenceWorker;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  await preparePerCallAccounts(devnet());
  const dropping = withDroppingFrames(memory);
  frames = dropping.frames;
  stack = await startCompletionStack(devnet(), { store: dropping.store, perCall: {} });
  faulty = await stack.startWorker({ fault: 'fail-before-first-chunk', capacity: 4 });
  healthy = await stack.startWorker({ faultsFromPrompt: true, capacity: 2 });
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await memory.close();
});

// Each case starts with no worker on record and an empty pool, so its call opens a new session and the
// faulty worker (more room) is still picked first: the service remembers failures across calls (the choice
// of workers), which would keep later cases off it, and every call runs in the service's shared sessions.
beforeEach(async () => {
  const reputation = new WorkerReputation(memory, { backoffMs: 1, maxBackoffMs: 1, recordTtlMs: 1 });
  await Promise.all([faulty, healthy].map((worker) => reputation.forget(worker.wallet.address)));
  await stack.closePooledSessions();
});

function kindsOf(jobId: string): JobLifecycleKind[] {
  const reservation = stack.events.find((event) => event.jobId === jobId)?.reservationId;
  return stack.events.filter((event) => event.reservationId === reservation).map((event) => event.kind);
}

async function eventually(jobId: string, kind: JobLifecycleKind): Promise<void> {
  await waitUntil(
    async () => kindsOf(jobId),
    (kinds) => kinds.includes(kind),
    { what: `${JobLifecycleKind[kind]} of job ${jobId}`, timeoutMs: 10_000 },
  );
}

describe('a job that fails before its first output', () => {
  it('is reassigned once to a new session, with no second payment, and answered there', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.delegatePosition(wallet.address, stack.signer);
    const events = await stack.complete(wallet.address, 'retry me');

    expect(shapeOf(events)).toEqual(['retrying', 'started', 'delta', 'completed']);
    const retrying = retryOf(events);
    const completed = completionOf(events)!;
    expect(retrying).toMatchObject({
      jobId: completed.service!.jobId,
      failedAttempt: 1,
      reasonCode: 'job_failed',
    });
    expect(completed.service!.worker!.hex).toBe(healthy.wallet.address);
    expect(deliveredText(events)).toBe(deterministicAnswer([{ role: 'user', content: 'retry me' }]));

    // The call ended on the signed final; ANSWERED waits for the commitment on chain.
    await eventually(completed.service!.jobId, JobLifecycleKind.ANSWERED);
    const job = await stack.chain.getJob(BigInt(completed.service!.jobId));
    expect(job).toMatchObject({ attempt: 2, state: JobState.Completed, worker: healthy.wallet.address });
    // One fee, taken once: the reassignment moved the escrowed fee.
    const after = await stack.chain.delegatePosition(wallet.address, stack.signer);
    expect(before.balance - after.balance).toBe(MODEL.feeWei);
    expect(before.allowance - after.allowance).toBe(MODEL.feeWei);
    await eventually(completed.service!.jobId, JobLifecycleKind.ANSWERED);
    const submitted = stack.events.find(
      (event) => event.jobId === completed.service!.jobId && event.kind === JobLifecycleKind.SUBMITTED,
    );
    expect(submitted?.worker?.hex).toBe(faulty.wallet.address);
    expect(kindsOf(completed.service!.jobId)).toEqual(
      expect.arrayContaining([
        JobLifecycleKind.SUBMITTED,
        JobLifecycleKind.REASSIGNED,
        JobLifecycleKind.ANSWERED,
      ]),
    );
  });

  it('is reassigned on a call paid per call too: the payer is debited once, by the settlement', async () => {
    const wallet = await depositedWallet(devnet());
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const payment = await verifiedPayment(stack, await signedPayment(stack, wallet));
    const events = await runPaid(stack, payment, 'retry me per call');

    expect(shapeOf(events)).toEqual(['retrying', 'started', 'delta', 'completed']);
    const completed = completionOf(events)!;
    expect(completed.service!.worker!.hex).toBe(healthy.wallet.address);
    await eventually(completed.service!.jobId, JobLifecycleKind.ANSWERED);
    const job = await stack.chain.getJob(BigInt(completed.service!.jobId));
    expect(job).toMatchObject({ attempt: 2, state: JobState.Completed, payer: wallet.address });
    expect((await stack.chain.getSession(job.sessionId)).owner).toBe(stack.signer);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
    // Its tx_hash is still the settlement, the transaction that took the payment.
    const [settlement] = await stack.chain.jobRegistry.queryFilter(
      stack.chain.jobRegistry.filters.DebitSettled(wallet.address),
    );
    expect(completed.service!.txHash!.hex).toBe(settlement!.transactionHash.toLowerCase());
  });

  it('ends job_failed after the retry fails too, and the fee goes back to balance and allowance', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.delegatePosition(wallet.address, stack.signer);
    const events = await stack.complete(wallet.address, 'fail twice #fault:fail-before-first-chunk');

    expect(shapeOf(events)).toEqual(['retrying', 'failed']);
    expect(failureOf(events)).toMatchObject({ error: { code: 'job_failed' }, jobSubmitted: true });
    const jobId = retryOf(events)!.jobId;
    await eventually(jobId, JobLifecycleKind.REFUNDED);
    expect((await stack.chain.getJob(BigInt(jobId))).state).toBe(JobState.Refunded);
    expect(await stack.chain.delegatePosition(wallet.address, stack.signer)).toEqual(before);
    expect(kindsOf(jobId)).toEqual(
      expect.arrayContaining([JobLifecycleKind.FAILED, JobLifecycleKind.REFUNDED]),
    );
    expect(kindsOf(jobId)).not.toContain(JobLifecycleKind.ANSWERED);
  });
});

describe('a job that fails after its first output', () => {
  it('is not retried: the stream ends job_failed and the job is refunded', async () => {
    const wallet = await stack.payingWallet();
    // The first attempt fails on the faulty worker; the second, on the healthy one, fails mid-answer.
    const events = await stack.complete(wallet.address, 'break midway #fault:fail-after-chunks=2');
    expect(shapeOf(events)).toEqual(['retrying', 'started', 'delta', 'failed']);
    expect(failureOf(events)).toMatchObject({ error: { code: 'job_failed' }, jobSubmitted: true });
    const jobId = retryOf(events)!.jobId;
    await eventually(jobId, JobLifecycleKind.REFUNDED);
  });
});

describe('divergence', () => {
  it('ends stream_diverged when the committed answer does not extend what was streamed, and refunds the Completed job', async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.delegatePosition(wallet.address, stack.signer);
    const content = 'start over #fault:restart-after-chunks=2';
    const events = await stack.complete(wallet.address, content);
    expect(shapeOf(events)).toEqual(['retrying', 'started', 'delta', 'failed']);
    expect(failureOf(events)).toMatchObject({ error: { code: 'stream_diverged' }, jobSubmitted: true });
    const jobId = retryOf(events)!.jobId;
    await eventually(jobId, JobLifecycleKind.DIVERGED);
    expect(deliveredText(events)).not.toBe(restartedDeterministicAnswer([{ role: 'user', content }]));
    // The answer never reached the caller: the job the worker committed is refunded (refundUndelivered),
    // so the wallet pays nothing, and REFUNDED (not DIVERGED) is what gives the key's hold back.
    await eventually(jobId, JobLifecycleKind.REFUNDED);
    expect((await stack.chain.getJob(BigInt(jobId))).state).toBe(JobState.Refunded);
    const after = await stack.chain.delegatePosition(wallet.address, stack.signer);
    expect(after.balance).toBe(before.balance);
    expect(after.allowance).toBe(before.allowance);
  });

  it('sends the missing tail when what was streamed is a strict prefix of the committed answer', async () => {
    const wallet = await stack.payingWallet();
    // The second delta of the answering attempt is lost before it is stored: the relay stops at the gap.
    frames.drop = (dedupId) => dedupId === '2:2';
    try {
      const events = await stack.complete(wallet.address, 'mind the gap');
      const answer = deterministicAnswer([{ role: 'user', content: 'mind the gap' }]);
      expect(frames.dropped).toContain('2:2');
      expect(shapeOf(events)).toEqual(['retrying', 'started', 'delta', 'completed']);
      const deltas = events.filter((event) => event.case === 'delta');
      // The first delta, then the whole rest of the answer at once.
      expect(deltas).toHaveLength(2);
      expect(deliveredText(events)).toBe(answer);
      expect(completionOf(events)!.text).toBe(answer);
    } finally {
      frames.drop = undefined;
    }
  });

  it('a worker that streams one answer and commits another: the caller has what it signed, the worker is disputed, slashed and the payer refunded', async () => {
    const wallet = await stack.payingWallet();
    const stakeBefore = await stack.chain.stakeOf(healthy.wallet.address);
    const events = await stack.complete(wallet.address, 'lie to me #fault:commit-mismatched-hash', {
      stream: false,
    });
    // The answer ends on the worker's signed final (docs/protocol.md, Ending on the signed final); the
    // commitment, checked afterwards, is not that final.
    expect(shapeOf(events)).toEqual(['retrying', 'started', 'completed']);
    const jobId = retryOf(events)!.jobId;
    await eventually(jobId, JobLifecycleKind.DISPUTED);
    expect((await stack.chain.getJob(BigInt(jobId))).state).toBe(JobState.Refunded);
    expect(await stack.chain.stakeOf(healthy.wallet.address)).toBeLessThan(stakeBefore);
  });
});

describe('a new session its worker never claims', () => {
  it('is closed and the call answers no_worker_available, with nothing submitted', async () => {
    // A registered worker that links and heartbeats with plenty of room, but never claims.
    const silent = await fundedWallet(devnet());
    await new ChainSide(devnet(), devnet().wallet(4)).registerWorker(silent);
    const link = new RawLink(stack.instance.listeners['worker-link']!);
    const beat = setInterval(
      () =>
        link.send({
          case: 'heartbeat',
          value: { models: [MODEL.name], freeJobSlots: 100, freeSessionSlots: 100 },
        }),
      100,
    );
    try {
      expect(await link.handshake(silent.address, silent)).toMatchObject({ case: 'welcome' });
      await waitUntil(
        () => stack.instance.linkServer!.live(),
        (live) => live.some((worker) => worker.address === silent.address),
        { what: 'the silent worker linked', timeoutMs: 5_000 },
      );
      const wallet = await stack.payingWallet();
      const before = await stack.chain.prepaidBalanceOf(wallet.address);
      const started = Date.now();
      const events = await stack.complete(wallet.address, 'anyone there?');
      expect(failureOf(events)).toMatchObject({
        error: { code: 'no_worker_available' },
        jobSubmitted: false,
      });
      expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
      expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
      const opened = stack.events.find(
        (event) => event.kind === JobLifecycleKind.SESSION_OPENED && event.worker?.hex === silent.address,
      )!;
      await waitUntil(
        () => stack.chain.getSession(BigInt(opened.sessionId)),
        (session) => session.state === SessionState.Closed,
        { what: 'the unclaimed session closed', timeoutMs: 10_000 },
      );
    } finally {
      clearInterval(beat);
      link.close();
    }
  });
});

describe('a submission something else overtakes before it is mined', () => {
  // Submissions go out in JobRegistry's `batch` (docs/protocol.md, Batches).
  const submitJobFor = new Interface(['function batch(bytes[])']).getFunction('batch')!.selector;
  const provider = () => devnet().provider;
  const submissionPending = () =>
    waitUntil(
      async () => {
        const pending = (await provider().send('eth_getBlockByNumber', ['pending', true])) as {
          transactions: { input: string }[];
        };
        return pending.transactions.some((tx) => tx.input.startsWith(submitJobFor));
      },
      (seen) => seen,
      { what: 'the submission in the mempool', timeoutMs: 15_000 },
    );
  /**
   * A pooled session of the healthy worker's, answered once (the faulty worker fails the first attempt),
   * that answer's commitment mined: a worker holds its commitments a second, and a `closeSession` sent
   * meanwhile would queue behind the commitment in the worker's nonces, mined after the submission.
   */
  const pooledSession = async (wallet: string) => {
    const warm = completionOf(await stack.complete(wallet, 'warm up'))!;
    await eventually(warm.service!.jobId, JobLifecycleKind.ANSWERED);
    return BigInt(warm.service!.sessionId);
  };

  it('cannot be the payer: its closeSession of the service session it pays in reverts, and the call is answered', async () => {
    const wallet = await stack.payingWallet();
    const sessionId = await pooledSession(wallet.address);
    const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, wallet);
    // The session is the service's: the payer is no party to it (docs/protocol.md, Sessions), and cannot
    // submit into it either (packages/contracts/test covers that).
    await expect(registry.closeSession.staticCall(sessionId)).rejects.toThrow(/SessionNotClosable/);
    const events = await stack.complete(wallet.address, 'still mine');
    expect(completionOf(events)!.service!.sessionId).toBe(sessionId.toString());
  });

  it('by its worker closing the session: the submission reverts, nothing is charged, and the session leaves the pool', async () => {
    const wallet = await stack.payingWallet();
    const sessionId = await pooledSession(wallet.address);
    const pool = sessionPoolGroup(stack.signer, modelIdOf(MODEL.name));
    // Back in the pool once its job is mined, which the call's end (on the signed final) does not wait for.
    await waitUntil(
      async () => (await memory.presence.list(pool)).map((entry) => entry.member),
      (members) => members.includes(sessionId.toString()),
      { what: 'the session back in the pool', timeoutMs: 10_000 },
    );
    const before = await stack.chain.prepaidBalanceOf(wallet.address);

    await provider().send('evm_setAutomine', [false]);
    let call: Promise<Awaited<ReturnType<typeof stack.complete>>> | undefined;
    try {
      call = stack.complete(wallet.address, 'overtake me');
      await submissionPending();
      // The session's worker, handed the job before inclusion, closes the session with a higher tip: mined
      // first, so the submission reverts in the same block.
      const registry = connectJobRegistry(
        devnet().deployment.jobRegistryAddress,
        healthy.wallet.connect(devnet().provider),
      );
      await registry.closeSession(sessionId, {
        maxPriorityFeePerGas: parseUnits('50', 'gwei'),
        maxFeePerGas: parseUnits('200', 'gwei'),
      });
      await provider().send('evm_mine', []);
    } finally {
      await provider().send('evm_setAutomine', [true]);
    }
    const events = await call!;
    // The worker may have answered before the block (it was handed the job at broadcast): the caller keeps
    // that answer, unpaid. Either way no job landed, so nothing is charged and FAILED gives the hold back.
    expect(['completed', 'failed']).toContain(shapeOf(events).at(-1));
    if (shapeOf(events).at(-1) === 'failed')
      expect(failureOf(events)).toMatchObject({ error: { code: 'job_failed' }, jobSubmitted: false });
    expect((await stack.chain.getSession(sessionId)).state).toBe(SessionState.Closed);
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
    // The run learns of the revert when the sender sees the receipt, after the caller may have had its answer.
    await waitUntil(
      async () => (await memory.presence.list(pool)).map((entry) => entry.member),
      (members) => !members.includes(sessionId.toString()),
      { what: 'the session out of the pool', timeoutMs: 10_000 },
    );
    await waitUntil(
      async () =>
        stack.events.some(
          (event) =>
            event.kind === JobLifecycleKind.FAILED &&
            event.payer?.hex.toLowerCase() === wallet.address.toLowerCase() &&
            event.jobId === '',
        ),
      (failed) => failed,
      { what: 'the FAILED event of the overtaken call', timeoutMs: 10_000 },
    );
  }, 60_000);
});
