import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { SessionState } from '@svc/chain';
import { MemoryStore } from '@svc/platform';
import { JobLifecycleKind } from '@svc/proto/gen/svc/events/v1/job_lifecycle_event_pb';
import { useDevnet, waitUntil } from '@svc/testkit';
import {
  completionOf,
  completionRequest,
  prepareServiceAccounts,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS } from '../support/models.js';

// A caller that opens a session and leaves before paying for a job costs the service the open and the
// close, and its worker a slot: such a session is closed SESSION_UNUSED_CLOSE after its claim (here 2 s),
// not after SESSION_IDLE_CLOSE (here 10 min), and its payer's budget of unused sessions gets the slot back.
const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, accounts: 14 });
const store = new MemoryStore();
let stack: CompletionStack;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  stack = await startCompletionStack(devnet(), {
    store,
    env: { SESSION_IDLE_CLOSE: '10m', SESSION_UNUSED_CLOSE: '2s' },
  });
  await stack.startWorker();
}, 120_000);

afterAll(async () => {
  await stack?.stop();
  await store.close();
});

/** Starts a call of `wallet` and leaves it once its new session is open; the session's id. */
async function leaveOnceOpened(wallet: string, reservationId: string): Promise<bigint> {
  const controller = new AbortController();
  const responses = stack.client.runCompletion(completionRequest(wallet, 'bye', reservationId), {
    signal: controller.signal,
  });
  const reading = (async () => {
    for await (const response of responses) void response;
  })().catch(() => undefined);
  const opened = await waitUntil(
    async () =>
      stack.events.find(
        (event) => event.reservationId === reservationId && event.kind === JobLifecycleKind.SESSION_OPENED,
      ),
    (event) => event !== undefined,
    { what: 'the session opened for the leaving call', timeoutMs: 10_000 },
  );
  controller.abort();
  await reading;
  await waitUntil(
    async () =>
      stack.events.filter((event) => event.reservationId === reservationId).map((event) => event.kind),
    (kinds) => kinds.includes(JobLifecycleKind.FAILED),
    { what: 'the leaving call failed', timeoutMs: 30_000 },
  );
  return BigInt(opened!.sessionId);
}

describe('a session no job was submitted in', () => {
  it('is closed early by the keeper, and its payer gets its budget back; a used one stays pooled', async () => {
    const leaver = await stack.payingWallet();
    const unused = await leaveOnceOpened(leaver.address, 'reservation-unused-1');
    const budget = `sessions:unused:payer:${leaver.address.toLowerCase()}`;
    expect(await store.concurrency.count(budget)).toBe(1);

    await waitUntil(
      () => stack.chain.getSession(unused),
      (session) => session.state === SessionState.Closed,
      { what: `unused session ${unused} closed early`, timeoutMs: 20_000, intervalMs: 200 },
    );
    await waitUntil(
      () => store.concurrency.count(budget),
      (count) => count === 0,
      { what: "the leaver's budget given back", timeoutMs: 5_000 },
    );

    // A session a job was submitted in waits out the idle close (10 min here), well past the unused one's.
    const payer = await stack.payingWallet();
    const used = BigInt(completionOf(await stack.complete(payer.address, 'paid for'))!.service!.sessionId);
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect((await stack.chain.getSession(used)).state).toBe(SessionState.Active);
  }, 60_000);
});
