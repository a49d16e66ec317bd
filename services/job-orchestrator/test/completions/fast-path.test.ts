import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { JobState } from '@svc/chain';
import { modelIdOf } from '@svc/contracts';
import { MemoryStore, waitAtMost } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { useDevnet, waitUntil } from '@svc/testkit';
import { deterministicAnswer } from '@svc/worker';
import {
  completionOf,
  deliveredText,
  failureOf,
  prepareServiceAccounts,
  shapeOf,
  startCompletionStack,
  type CompletionEvents,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { RpcFaultProxy } from '../support/rpc-fault-proxy.js';
import { sessionPoolGroup } from '../../src/sessions/session-records.js';

// The fast path (docs/protocol.md, Starting before inclusion): with mining paused, a call is answered whole
// before its submission is in any block, and charged only once it is mined; one that never lands charges
// nothing. Blocks are mined by hand here, so "before inclusion" is exact, not a matter of timing.

const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, accounts: 14 });

const rpc = (method: string, params: unknown[] = []) => devnet().provider.send(method, params);

/** Runs `work` with the node mining nothing until it returns (automine off), then mines again. */
async function withMiningPaused<T>(work: () => Promise<T>): Promise<T> {
  await rpc('evm_setAutomine', [false]);
  try {
    return await work();
  } finally {
    await rpc('evm_setAutomine', [true]);
  }
}

function kindsOf(stack: CompletionStack, jobId: string): JobLifecycleKind[] {
  const reservation = stack.events.find((event) => event.jobId === jobId)?.reservationId;
  return stack.events.filter((event) => event.reservationId === reservation).map((event) => event.kind);
}

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
}, 60_000);

describe('a call on a warm service', () => {
  const store = new MemoryStore();
  let stack: CompletionStack;

  beforeAll(async () => {
    stack = await startCompletionStack(devnet(), { store, env: { SESSION_WARM_SPARE: '1' } });
    await stack.startWorker();
    // The keeper's rounds open the spare session ahead of any call.
    const pool = sessionPoolGroup(stack.signer, modelIdOf(MODEL.name));
    await waitUntil(
      () => store.presence.list(pool),
      (pooled) => pooled.length >= 1,
      { what: 'a spare session in the pool', timeoutMs: 20_000 },
    );
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await store.close();
  });

  it("answers a new wallet's first call whole before its submission is mined, and charges it only once mined", async () => {
    const wallet = await stack.payingWallet();
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    const content = 'no block needed';
    let events: CompletionEvents = [];
    let pendingHash = '';
    await withMiningPaused(async () => {
      const call = stack.complete(wallet.address, content);
      // Nothing is mined meanwhile: the whole answer must come from the worker's start before inclusion.
      expect(await waitAtMost(call, 15_000)).toBe(true);
      events = await call;
      const started = events.find((event) => event.case === 'started')!.value;
      const jobId = BigInt(started.service!.jobId);
      const sessionId = BigInt(started.service!.sessionId);
      // The job id is the session's next, fixed before inclusion (docs/protocol.md, Job ids).
      expect(jobId >> 32n).toBe(sessionId);
      expect((await stack.chain.getJob(jobId)).attempt).toBe(0);
      // x-service's tx_hash is the submission waiting in the node's pool, not yet in a block.
      pendingHash = started.service!.txHash!.hex;
      const pending = await devnet().provider.getTransaction(pendingHash);
      expect(pending?.blockNumber).toBeNull();
      expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
    });
    expect(shapeOf(events)).toEqual(expect.arrayContaining(['started', 'delta', 'completed']));
    expect(deliveredText(events)).toBe(deterministicAnswer([{ role: 'user', content }]));
    const completed = completionOf(events)!;
    const jobId = completed.service!.jobId;
    // The wallet's first call waited for no session: none was opened or claimed for it.
    expect(kindsOf(stack, jobId)).not.toContain(JobLifecycleKind.SESSION_OPENED);
    // Mined now: the worker commits what it signed, and only then is the fee counted as spent.
    await waitUntil(
      async () => kindsOf(stack, jobId),
      (kinds) => kinds.includes(JobLifecycleKind.ANSWERED),
      { what: `ANSWERED of job ${jobId}`, timeoutMs: 15_000 },
    );
    const kinds = kindsOf(stack, jobId);
    expect(kinds.indexOf(JobLifecycleKind.COMPLETED)).toBeLessThan(kinds.indexOf(JobLifecycleKind.ANSWERED));
    expect(kinds.filter((kind) => kind === JobLifecycleKind.ANSWERED)).toHaveLength(1);
    const job = await stack.chain.getJob(BigInt(jobId));
    expect(job.state).toBe(JobState.Completed);
    expect(job.payer).toBe(wallet.address);
    expect((await devnet().provider.getTransactionReceipt(pendingHash))?.status).toBe(1);
    expect(before - (await stack.chain.prepaidBalanceOf(wallet.address))).toBe(MODEL.feeWei);
  });
});

describe('a submission that never lands', () => {
  const store = new MemoryStore();
  let proxy: RpcFaultProxy;
  let stack: CompletionStack;

  beforeAll(async () => {
    proxy = await RpcFaultProxy.start(devnet().anvil.rpcUrl);
    stack = await startCompletionStack(devnet(), { store, rpcUrl: proxy.url });
    // A slow worker: the submission is given up before the answer is done.
    await stack.startWorker({ tokensPerSecond: 4 });
  }, 120_000);

  afterAll(async () => {
    await stack?.stop();
    await proxy?.close();
    await store.close();
  });

  it('ends the call job_failed, charges nothing, retires its session, and is sent again meanwhile', async () => {
    const wallet = await stack.payingWallet();
    const warm = completionOf(await stack.complete(wallet.address, 'open a session'))!;
    const sessionId = warm.service!.sessionId;
    const before = await stack.chain.prepaidBalanceOf(wallet.address);
    // From now on the node never sees what the orchestrator broadcasts: its submission cannot land.
    proxy.swallowBroadcasts(true);
    const call = stack.complete(wallet.address, 'lost on the way');
    // Blocks go by without the job (the worker gives an unconfirmed job up after 5).
    const mining = setInterval(() => void rpc('evm_mine').catch(() => undefined), 200);
    let events: CompletionEvents;
    try {
      events = await call;
    } finally {
      clearInterval(mining);
    }
    expect(shapeOf(events).at(-1)).toBe('failed');
    // Its job may still land (the journal keeps the signed transaction): reported as maybe submitted, so
    // the key's hold stays until the keeper sees how it ends.
    expect(failureOf(events)).toMatchObject({ error: { code: 'job_failed' }, jobSubmitted: true });
    // The sender tried it again (dropped from the pool: sent again with higher fees) before giving up.
    expect(proxy.swallowed).toBeGreaterThan(1);
    expect(await stack.chain.prepaidBalanceOf(wallet.address)).toBe(before);
    // The session's worker signed for a job id that may yet be taken: the session never serves again.
    const pool = sessionPoolGroup(stack.signer, modelIdOf(MODEL.name));
    expect((await store.presence.list(pool)).map((entry) => entry.member)).not.toContain(sessionId);
    const reservation = stack.events.findLast(
      (event) => event.kind === JobLifecycleKind.REQUESTED,
    )!.reservationId;
    const kinds = stack.events
      .filter((event) => event.reservationId === reservation)
      .map((event) => event.kind);
    expect(kinds).not.toContain(JobLifecycleKind.ANSWERED);
    expect(kinds).not.toContain(JobLifecycleKind.SUBMITTED);
  }, 90_000);
});
