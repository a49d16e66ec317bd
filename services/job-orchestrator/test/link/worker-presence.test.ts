import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import { MemoryStore, type Store } from '@svc/platform';
import { createTestStore, type TestStore } from '@svc/platform/testing';
import { useDevnet, waitUntil } from '@svc/testkit';
import { DEPLOYED_MODELS, MODEL } from '../support/models.js';
import { OrchestratorReplica } from '../support/orchestrator-harness.js';
import {
  startReferenceWorker,
  WORKER_CAPACITY,
  WORKER_SESSION_LIMIT,
  type ReferenceWorker,
} from '../support/reference-worker.js';

const devnet = useDevnet({ models: DEPLOYED_MODELS });
let redis: TestStore;

beforeAll(() => {
  redis = createTestStore('orchestrator-test');
});

afterAll(async () => {
  await redis.cleanup();
});

// Replicas share one in-memory store object, or each open their own connection to the same Redis namespace.
const stores: [string, () => Store, 'shared object' | 'own connection'][] = [
  ['the in-memory store', () => new MemoryStore(), 'shared object'],
  ['the Redis store', () => redis.open(), 'own connection'],
];

describe.each(stores)('a reference worker linked over %s', (_label, openStore, sharing) => {
  const replicas: OrchestratorReplica[] = [];
  const opened: Store[] = [];
  let worker: ReferenceWorker | undefined;

  async function startReplica(store: Store): Promise<OrchestratorReplica> {
    const replica = new OrchestratorReplica(devnet(), store);
    await replica.start();
    replicas.push(replica);
    return replica;
  }

  afterEach(async () => {
    await worker?.stop();
    worker = undefined;
    await Promise.all(replicas.splice(0).map((replica) => replica.stop()));
    // Redis stores are closed by the namespace's cleanup.
    for (const store of opened.splice(0)) if (store instanceof MemoryStore) await store.close();
  });

  function open(): Store {
    const store = openStore();
    opened.push(store);
    return store;
  }

  it('is welcomed and listed with its models and free slots, then withdrawn when it stops', async () => {
    const replica = await startReplica(open());
    worker = await startReferenceWorker(devnet(), replica.target);
    const address = worker.worker.address;

    const live = await waitUntil(
      () => replica.server.live(),
      (workers) => workers.length === 1,
      { what: 'the worker in presence', timeoutMs: 10_000 },
    );
    expect(live[0]).toMatchObject({
      address,
      replicaId: replica.server.replicaId,
      models: [MODEL.name],
      freeJobSlots: WORKER_CAPACITY,
      freeSessionSlots: WORKER_SESSION_LIMIT,
    });
    expect(worker.worker.link?.connected).toBe(true);
    expect(replica.server.isLinkedHere(address)).toBe(true);

    await worker.stop();
    worker = undefined;
    await waitUntil(
      () => replica.server.live(),
      (workers) => workers.length === 0,
      { what: 'the worker out of presence', timeoutMs: 5_000 },
    );
    expect(replica.server.isLinkedHere(address)).toBe(false);
  });

  it('shows a worker linked to one replica to another replica sharing the store', async () => {
    const store = open();
    const holding = await startReplica(store);
    const other = await startReplica(sharing === 'own connection' ? open() : store);
    worker = await startReferenceWorker(devnet(), holding.target);
    const seen = await waitUntil(
      () => other.server.live(),
      (workers) => workers.length === 1,
      { what: 'the worker seen by the other replica', timeoutMs: 10_000 },
    );
    expect(seen[0]).toMatchObject({ address: worker.worker.address, replicaId: holding.server.replicaId });
    // Hints go through the replica holding the link.
    const hint = {
      case: 'sessionOpened' as const,
      value: { hintId: 'h', sessionId: '1', model: MODEL.name },
    };
    expect(other.server.sendHint(worker.worker.address, hint)).toBe(false);
    expect(holding.server.sendHint(worker.worker.address, hint)).toBe(true);
  });
});
