import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitAtMost } from '@svc/platform';
import { createTestStore, type TestStore } from '@svc/platform/testing';
import { useDevnet } from '@svc/testkit';
import { deterministicAnswer, tokenize } from '@svc/worker';
import {
  completionOf,
  deliveredText,
  prepareServiceAccounts,
  SERVICE_ACCOUNTS,
  startCompletionStack,
  type CompletionStack,
} from '../support/completion-stack.js';
import { DEPLOYED_MODELS } from '../support/models.js';

// Two orchestrator replicas sharing one Redis and one signer with its operators. The workers link to
// replica A only, so every answer served by replica B crossed replicas through the store's frame streams.
const devnet = useDevnet({ models: DEPLOYED_MODELS, warmBlobs: true, accounts: 14 });
let redis: TestStore;
let replicaA: CompletionStack;
let replicaB: CompletionStack;

beforeAll(async () => {
  await prepareServiceAccounts(devnet());
  redis = createTestStore('orchestrator-replicas');
  replicaA = await startCompletionStack(devnet(), { store: redis.open() });
  replicaB = await startCompletionStack(devnet(), { store: redis.open() });
  await replicaA.startWorker();
  await replicaA.startWorker();
}, 120_000);

afterAll(async () => {
  await replicaB?.stop();
  await replicaA?.stop();
  await redis?.cleanup();
});

describe('two replicas sharing one signer and one Redis', () => {
  it('hand a job to a worker linked to the other replica before inclusion: the call is answered with nothing mined', async () => {
    const wallet = await replicaA.payingWallet();
    // A session of replica B's pool, claimed by a worker whose link is on replica A.
    completionOf(await replicaB.complete(wallet.address, 'open a session'));
    const rpc = (method: string, params: unknown[] = []) => devnet().provider.send(method, params);
    await rpc('evm_setAutomine', [false]);
    let events: Awaited<ReturnType<CompletionStack['complete']>>;
    try {
      // With nothing mined, only the pending_job routed through the store's channel lets it answer.
      const call = replicaB.complete(wallet.address, 'across replicas, before the block');
      expect(await waitAtMost(call, 15_000)).toBe(true);
      events = await call;
      const started = events.find((event) => event.case === 'started')!.value;
      expect((await replicaB.chain.getJob(BigInt(started.service!.jobId))).attempt).toBe(0);
    } finally {
      await rpc('evm_setAutomine', [true]);
    }
    expect(deliveredText(events)).toBe(
      deterministicAnswer([{ role: 'user', content: 'across replicas, before the block' }]),
    );
  });

  it('see the same workers and models', async () => {
    const live = (stack: CompletionStack) => stack.instance.linkServer!.live();
    expect((await live(replicaB)).map((worker) => worker.address)).toEqual(
      (await live(replicaA)).map((worker) => worker.address),
    );
    expect(await replicaB.client.listModels({})).toEqual(await replicaA.client.listModels({}));
  });

  it('serve concurrent calls with no nonce collision and no lost frame', async () => {
    // Funded one after another: the funding account's nonces are the test's, not the service's.
    const wallets = [
      await replicaA.payingWallet(),
      await replicaA.payingWallet(),
      await replicaA.payingWallet(),
    ];
    const calls = wallets.flatMap((wallet, index) =>
      [replicaA, replicaB].map((replica, side) => {
        const content = `wallet ${index} via replica ${side === 0 ? 'A' : 'B'}`;
        return replica.complete(wallet.address, content).then((events) => ({ content, events }));
      }),
    );
    const results = await Promise.all(calls);

    for (const { content, events } of results) {
      const answer = deterministicAnswer([{ role: 'user', content }]);
      expect(completionOf(events)?.text).toBe(answer);
      expect(deliveredText(events)).toBe(answer);
      // One delta per token the worker sent: nothing was lost and made up by the final's tail.
      expect(events.filter((event) => event.case === 'delta')).toHaveLength(tokenize(answer).length);
    }
    const jobs = results.map(({ events }) => completionOf(events)!.service!.jobId);
    expect(new Set(jobs).size).toBe(jobs.length);

    // The shared allocator is exactly where the chain is for every operator: no nonce handed out twice,
    // none skipped.
    const store = redis.open();
    const operators = [...SERVICE_ACCOUNTS.blobOperators, SERVICE_ACCOUNTS.plainOperator].map(
      (index) => devnet().wallet(index).address,
    );
    for (const operator of operators) {
      const next = await store.nonces.peek(operator);
      const onChain = await devnet().provider.getTransactionCount(operator, 'latest');
      if (next !== null) expect(next).toBe(onChain);
    }
  });
});
