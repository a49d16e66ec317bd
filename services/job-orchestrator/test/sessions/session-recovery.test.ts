import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseEther, type Wallet } from 'ethers';
import { SessionState } from '@svc/chain';
import { connectJobRegistry, jobRegistryInterface } from '@svc/contracts';
import { MemoryStore, type Store } from '@svc/platform';
import { createTestStore, deleteRedisNamespace, type TestStore } from '@svc/platform/testing';
import { useDevnet, waitUntil } from '@svc/testkit';
import { deterministicAnswer } from '@svc/worker';
import {
  SERVICE_ACCOUNTS,
  completionOf,
  deliveredText,
  failureOf,
  prepareServiceAccounts,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS } from '../support/models.js';
import { fundedWallet } from '../support/reference-worker.js';
import { OPEN_SESSIONS_GROUP } from '../../src/sessions/session-records.js';

// The chain is the source of truth for sessions. A process restarted on an in-memory store (npm start) or
// a Redis that lost its keys no longer knows the sessions it opened; without recovering them from the
// chain the workers' session slots fill up round after round until every call is 503.
const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, accounts: 14 });
/** Small, so that sessions that are never reused or closed would fill both workers within two rounds. */
const SESSION_LIMIT = 3;
const CALLS_PER_ROUND = 4;

interface WorkerIdentity {
  readonly wallet: Wallet;
  readonly dataDir: string;
}
let identities: WorkerIdentity[];

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  identities = [];
  for (let index = 0; index < 2; index += 1)
    identities.push({
      wallet: await fundedWallet(devnet()),
      dataDir: await mkdtemp(join(tmpdir(), 'recovery-worker-')),
    });
}, 60_000);

afterAll(async () => {
  for (const identity of identities ?? []) await rm(identity.dataDir, { recursive: true, force: true });
});

async function payingWallet(): Promise<Wallet> {
  const wallet = (await fundedWallet(devnet())).connect(devnet().provider);
  const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, wallet);
  await (
    await registry.depositAndAuthorize(devnet().wallet(SERVICE_ACCOUNTS.signer).address, {
      value: parseEther('1'),
    })
  ).wait();
  return wallet;
}

/** The stack as one run of `npm start` has it: the same two workers (keys and data kept) on `store`. */
async function startRun(store: Store, env: Record<string, string> = {}): Promise<CompletionStack> {
  const stack = await startCompletionStack(devnet(), { store, env });
  for (const identity of identities) await stack.startWorker({ identity, sessionLimit: SESSION_LIMIT });
  return stack;
}

/** Sessions of `owner` opened and not closed on chain. */
async function openSessionsOf(owner: string): Promise<bigint[]> {
  const registry = connectJobRegistry(devnet().deployment.jobRegistryAddress, devnet().provider);
  const logs = await devnet().provider.getLogs({
    address: devnet().deployment.jobRegistryAddress,
    fromBlock: devnet().deployment.deploymentBlock,
    topics: [jobRegistryInterface.getEvent('SessionOpened')!.topicHash],
  });
  const open: bigint[] = [];
  for (const log of logs) {
    const parsed = registry.interface.parseLog(log)!;
    if ((parsed.args.owner as string).toLowerCase() !== owner.toLowerCase()) continue;
    const sessionId = parsed.args.sessionId as bigint;
    const state = (await registry.getSession(sessionId)).state;
    if (Number(state) === SessionState.Open || Number(state) === SessionState.Active) open.push(sessionId);
  }
  return open;
}

async function concurrentCalls(stack: CompletionStack, wallet: string, round: number, calls: number) {
  const outcomes = await Promise.all(
    Array.from({ length: calls }, (_, index) => stack.complete(wallet, `round ${round} call ${index}`)),
  );
  return outcomes.map((events, index) => ({
    expected: deterministicAnswer([{ role: 'user', content: `round ${round} call ${index}` }]),
    text: deliveredText(events),
    failure: failureOf(events)?.error?.code,
    session: completionOf(events)?.service?.sessionId,
  }));
}

describe('sessions recovered from the chain', () => {
  it('ten restarts on one state folder, four concurrent calls each time: every call answered', async () => {
    const wallet = await payingWallet();
    const rounds: string[] = [];
    for (let round = 1; round <= 10; round += 1) {
      // A new in-memory store each run, as `npm start` has; the chain and the workers' data are kept.
      const stack = await startRun(new MemoryStore());
      try {
        const outcomes = await concurrentCalls(stack, wallet.address, round, CALLS_PER_ROUND);
        const open = await openSessionsOf(wallet.address);
        rounds.push(
          `round ${round}: ${outcomes.filter((outcome) => outcome.failure === undefined).length}/${CALLS_PER_ROUND} answered, ` +
            `failures [${outcomes.flatMap((outcome) => outcome.failure ?? []).join(',')}], ` +
            `sessions used [${[...new Set(outcomes.map((outcome) => outcome.session))].join(',')}], ` +
            `open on chain ${open.length}`,
        );
        for (const outcome of outcomes) {
          expect(outcome.failure).toBeUndefined();
          expect(outcome.text).toBe(outcome.expected);
        }
        // Reused, not piled up: never more sessions open than the calls of one round needed.
        expect(open.length).toBeLessThanOrEqual(CALLS_PER_ROUND);
      } finally {
        await stack.stop();
      }
    }
    console.log(rounds.join('\n'));
  }, 300_000);

  it('a session whose worker lost its key is closed at recovery, and the call is answered in a new one', async () => {
    const wallet = await payingWallet();
    const first = await startRun(new MemoryStore());
    let lost: bigint;
    try {
      const [outcome] = await concurrentCalls(first, wallet.address, 0, 1);
      expect(outcome!.failure).toBeUndefined();
      lost = BigInt(outcome!.session!);
    } finally {
      await first.stop();
    }
    // Both workers come back without their session keys (their data folders lost).
    for (const identity of identities) {
      await rm(join(identity.dataDir, 'session-keys'), { recursive: true, force: true });
    }
    const second = await startRun(new MemoryStore());
    try {
      const [outcome] = await concurrentCalls(second, wallet.address, 1, 1);
      expect(outcome!.failure).toBeUndefined();
      expect(outcome!.text).toBe(outcome!.expected);
      expect(BigInt(outcome!.session!)).not.toBe(lost);
      await waitUntil(
        () => second.chain.getSession(lost),
        (session) => session.state === SessionState.Closed,
        { what: `session ${lost} closed`, timeoutMs: 15_000 },
      );
    } finally {
      await second.stop();
    }
  }, 120_000);
});

describe('a Redis that loses its keys under load', () => {
  let redis: TestStore;

  beforeAll(() => {
    redis = createTestStore('session-recovery');
  });

  afterAll(async () => {
    await redis?.cleanup();
  });

  it('keeps answering, reuses the sessions it had, and the keeper knows every open session again', async () => {
    const wallet = await payingWallet();
    const stack = await startRun(redis.open());
    try {
      const warm = await concurrentCalls(stack, wallet.address, 0, 3);
      expect(warm.map((outcome) => outcome.failure)).toEqual([undefined, undefined, undefined]);
      const openBefore = await openSessionsOf(wallet.address);

      // Load: three callers back to back; the store's keys vanish while they run. A call in flight then, or
      // arriving before the workers' next heartbeats are back in the store, may fail (its answer frames or
      // the workers' presence went with the keys); every call started once they are back is answered.
      const results: { failure: string | undefined; startedAtMs: number }[] = [];
      let stop = false;
      const caller = async (lane: number) => {
        for (let call = 0; !stop; call += 1) {
          const startedAtMs = Date.now();
          const [outcome] = await concurrentCalls(stack, wallet.address, 100 + lane * 1000 + call, 1);
          results.push({ failure: outcome!.failure, startedAtMs });
        }
      };
      const callers = [0, 1, 2].map(caller);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      await deleteRedisNamespace(redis.namespace);
      // One presence TTL of the stack (LINK_PRESENCE_TTL): every worker heartbeated again by then.
      const healedAtMs = Date.now() + 1_000;
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      stop = true;
      await Promise.all(callers);

      const afterLoss = results.filter((result) => result.startedAtMs >= healedAtMs);
      const duringLoss = results.filter((result) => result.startedAtMs < healedAtMs);
      console.log(
        `store loss under load: ${results.length} calls; ${duringLoss.length} started before it healed ` +
          `(failed: [${duringLoss.flatMap((result) => result.failure ?? []).join(',')}]), ` +
          `${afterLoss.length} after (failed: [${afterLoss.flatMap((result) => result.failure ?? []).join(',')}])`,
      );
      expect(afterLoss.length).toBeGreaterThan(3);
      expect(afterLoss.filter((result) => result.failure !== undefined)).toEqual([]);
      // The sessions it had are reused. A recovered session is taken only once its worker's heartbeat lists
      // it again, so a caller arriving in that gap may open one new session: at most one per caller, never
      // one per call.
      const openAfter = await openSessionsOf(wallet.address);
      expect(openAfter.length).toBeLessThanOrEqual(openBefore.length + 3);
      await waitUntil(
        async () =>
          (await redis.open().presence.list(OPEN_SESSIONS_GROUP)).map((entry) => BigInt(entry.member)),
        (known) => openAfter.every((sessionId) => known.includes(sessionId)),
        { what: 'every open session known to the keeper again', timeoutMs: 10_000 },
      );
    } finally {
      await stack.stop();
    }
  }, 120_000);
});
