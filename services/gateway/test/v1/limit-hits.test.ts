import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  createLogger,
  LIMIT_HITS_TALLY,
  limitHitField,
  StoreUnavailableError,
  type Store,
  type Tallies,
} from '@svc/platform';
import { testServiceClientOptions } from '@svc/platform/testing';
import { closeClient, createClient, GrpcStatus, RpcError } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { waitFor } from '@svc/testkit';
import type { KeyServiceClient } from '../../src/key-service-client.js';
import { LimitHitReporter } from '../../src/v1/limit-hit-reporter.js';
import { silentLogger, startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey, type MintedKey } from './support/keys.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

// Audit finding: every 429 became a key-service RPC and a PostgreSQL write. Refusals are now counted in the
// store and reach the key-service as one aggregate per flush.

const REFUSALS = 300;

// One call per key per hour: every call after the first is refused. Listings are polled freely.
const REFUSING = {
  TRUST_PROXY: 'loopback',
  V1_KEY_RATE_LIMIT: '1',
  V1_KEY_RATE_WINDOW: '1h',
  KEY_ROUTES_RATE_LIMIT: '100000',
};

let redis: TestStore;
let keyService: RunningKeyService;
let replicaA: V1Gateway;
let replicaB: V1Gateway;

/** RPCs both replicas made to count limit hits (the old one-per-refusal method and the batch one). */
function limitHitRpcs(): number {
  return [replicaA, replicaB]
    .flatMap((gateway) => [
      gateway.keyServiceCalls.get('recordLimitHit') ?? 0,
      gateway.keyServiceCalls.get('recordLimitHits') ?? 0,
    ])
    .reduce((sum, calls) => sum + calls, 0);
}

/** Sends `count` calls with the key, `parallel` at a time, spread over the gateways; returns the statuses. */
async function callModels(minted: MintedKey, gateways: V1Gateway[], count: number, parallel = 50) {
  const statuses: number[] = [];
  for (let start = 0; start < count; start += parallel) {
    const wave = Array.from({ length: Math.min(parallel, count - start) }, async (_, i) => {
      const gateway = gateways[(start + i) % gateways.length]!;
      const response = await fetch(`${gateway.baseUrl}/v1/models`, {
        headers: { authorization: `Bearer ${minted.key}` },
      });
      await response.arrayBuffer();
      return response.status;
    });
    statuses.push(...(await Promise.all(wave)));
  }
  return statuses;
}

function openStore(): Store {
  return redis.open();
}

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(openStore());
  const env = { ...REFUSING, V1_LIMIT_HIT_FLUSH_INTERVAL: '100ms' };
  replicaA = await startV1Gateway({ keyServiceAddress: keyService.address, store: openStore(), env });
  replicaB = await startV1Gateway({ keyServiceAddress: keyService.address, store: openStore(), env });
});

afterAll(async () => {
  await Promise.all([replicaA?.close(), replicaB?.close()]);
  await keyService?.close();
  await redis?.cleanup();
});

describe('limit hits under a flood of refusals', () => {
  it(`counts ${REFUSALS} refusals of one key exactly, with a handful of key-service RPCs instead of one each`, async () => {
    const minted = await mintKey(replicaA.baseUrl);
    const rpcsBefore = limitHitRpcs();
    const statuses = await callModels(minted, [replicaA], REFUSALS + 1);
    expect(statuses.filter((status) => status === 429)).toHaveLength(REFUSALS);

    await waitFor(
      async () => (await listedKey(replicaA.baseUrl, minted)).limitHits.rate === REFUSALS || undefined,
      {
        what: `limitHits.rate to reach ${REFUSALS}`,
      },
    );
    const rpcs = limitHitRpcs() - rpcsBefore;
    // The refusals take about a second and each replica flushes every 100 ms: a few dozen calls at most (a
    // handful measured), where every refusal used to be one.
    expect(rpcs).toBeGreaterThanOrEqual(1);
    expect(rpcs).toBeLessThanOrEqual(40);

    // Nothing is counted twice by later flushes.
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits.rate).toBe(REFUSALS);
  });

  it('counts refusals answered by two replicas, both flushing, exactly once', async () => {
    const minted = await mintKey(replicaA.baseUrl);
    const statuses = await callModels(minted, [replicaA, replicaB], REFUSALS + 1);
    expect(statuses.filter((status) => status === 429)).toHaveLength(REFUSALS);
    await waitFor(
      async () => (await listedKey(replicaB.baseUrl, minted)).limitHits.rate === REFUSALS || undefined,
      {
        what: `limitHits.rate to reach ${REFUSALS}`,
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await listedKey(replicaB.baseUrl, minted)).limitHits.rate).toBe(REFUSALS);
  });
});

/** A key-service client whose RecordLimitHits calls go through `intercept`, the rest straight through. */
function interceptingBatches(
  client: KeyServiceClient,
  intercept: (request: RecordLimitHitsInput, send: () => Promise<unknown>) => Promise<unknown>,
): KeyServiceClient {
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property !== 'recordLimitHits') return Reflect.get(target, property, receiver) as unknown;
      return (request: RecordLimitHitsInput) => intercept(request, () => target.recordLimitHits(request));
    },
  });
}

type RecordLimitHitsInput = Parameters<KeyServiceClient['recordLimitHits']>[0];

// The reporters below count in a namespace of their own: the replicas above flush theirs every 100 ms, and
// would otherwise deliver (correctly, but at their own moment) what these tests count.
let isolated: TestStore;

beforeAll(() => {
  isolated = createTestStore();
});
afterAll(async () => {
  await isolated?.cleanup();
});

describe('limit-hit flushes', () => {
  let client: KeyServiceClient;

  beforeAll(() => {
    client = createClient(
      KeyService,
      keyService.address,
      testServiceClientOptions('key-service', { defaultUnaryTimeoutMs: 10_000 }),
    );
  });
  afterAll(() => closeClient(client));

  it.each([
    ['the call never reached the key-service', false],
    ['the answer was lost after the key-service counted the batch', true],
  ])('retries a batch whose delivery failed (%s) under its id, and counts it once', async (_, applied) => {
    const minted = await mintKey(replicaA.baseUrl);
    const sent: string[] = [];
    const flaky = interceptingBatches(client, async (request, send) => {
      sent.push(request.batchId ?? '');
      if (sent.length > 1) return send();
      if (applied) await send();
      throw new Error('connection reset');
    });
    const reporter = new LimitHitReporter(flaky, silentLogger, { tallies: isolated.open().tallies });
    for (let i = 0; i < 40; i += 1) reporter.report(minted.id, 'rate');
    await reporter.flush();
    expect(sent).toHaveLength(1);
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits.rate).toBe(applied ? 40 : 0);

    // Refusals after the failed flush wait for the batch after the retried one.
    for (let i = 0; i < 2; i += 1) reporter.report(minted.id, 'concurrency');
    await reporter.stop();
    expect(sent).toHaveLength(3);
    expect(sent[1]).toBe(sent[0]);
    expect(sent[2]).not.toBe(sent[0]);
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits).toMatchObject({ rate: 40, concurrency: 2 });
  });

  it('drops a batch the key-service refuses as invalid, so it cannot hold up the batches after it', async () => {
    const minted = await mintKey(replicaA.baseUrl);
    const sent: string[] = [];
    const refusingFirst = interceptingBatches(client, async (request, send) => {
      sent.push(request.batchId ?? '');
      if (sent.length > 1) return send();
      throw new RpcError(GrpcStatus.INVALID_ARGUMENT, 'no', 'invalid_request');
    });
    const reporter = new LimitHitReporter(refusingFirst, silentLogger, { tallies: isolated.open().tallies });
    reporter.report(minted.id, 'rate');
    await reporter.flush();
    reporter.report(minted.id, 'concurrency');
    await reporter.stop();
    expect(sent).toHaveLength(2);
    expect(sent[1]).not.toBe(sent[0]);
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits).toMatchObject({ rate: 0, concurrency: 1 });
  });

  it('counts exactly once while two replicas report and flush at the same time', async () => {
    const minted = await mintKey(replicaA.baseUrl);
    const reporters = [isolated.open(), isolated.open()].map(
      (store) => new LimitHitReporter(client, silentLogger, { tallies: store.tallies }),
    );
    for (let round = 0; round < 20; round += 1) {
      reporters.forEach((reporter, i) => {
        for (let j = 0; j < 10; j += 1) reporter.report(minted.id, i === 0 ? 'rate' : 'spendCap');
      });
      // Both replicas flush at once, every round.
      await Promise.all(reporters.map((reporter) => reporter.flush()));
    }
    await Promise.all(reporters.map((reporter) => reporter.stop()));
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits).toMatchObject({ rate: 200, spendCap: 200 });
  });

  it('hands over the counts of a stopping replica in its last flush', async () => {
    const minted = await mintKey(replicaA.baseUrl);
    // A store no other replica flushes, and a flush interval that never comes within the test: only the
    // shutdown flush can deliver these refusals.
    const stopping = await startV1Gateway({
      keyServiceAddress: keyService.address,
      store: isolated.open(),
      env: { ...REFUSING, V1_LIMIT_HIT_FLUSH_INTERVAL: '1h' },
    });
    try {
      const statuses = await callModels(minted, [stopping], 21);
      expect(statuses.filter((status) => status === 429)).toHaveLength(20);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect((await listedKey(replicaA.baseUrl, minted)).limitHits.rate).toBe(0);
    } finally {
      await stopping.close();
    }
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits.rate).toBe(20);
  });
});

describe('the reporter under a flood while the store is slow', () => {
  it('keeps one store write per key and limit in flight, and loses no count', async () => {
    const store = isolated.open();
    let inFlight = 0;
    let mostInFlight = 0;
    let writes = 0;
    const slowTallies: Tallies = {
      add: async (tally, field, by) => {
        writes += 1;
        inFlight += 1;
        mostInFlight = Math.max(mostInFlight, inFlight);
        await new Promise((resolve) => setTimeout(resolve, 20));
        inFlight -= 1;
        return store.tallies.add(tally, field, by);
      },
      claim: (...args) => store.tallies.claim(...args),
      acknowledge: (...args) => store.tallies.acknowledge(...args),
      pending: (...args) => store.tallies.pending(...args),
    };
    const minted = await mintKey(replicaA.baseUrl);
    const client = createClient(
      KeyService,
      keyService.address,
      testServiceClientOptions('key-service', { defaultUnaryTimeoutMs: 10_000 }),
    );
    const reporter = new LimitHitReporter(client, silentLogger, { tallies: slowTallies });
    for (let i = 0; i < 10_000; i += 1) {
      reporter.report(minted.id, 'rate');
      if (i % 1_000 === 999) await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await reporter.stop();
    closeClient(client);
    expect(mostInFlight).toBe(1);
    expect(writes).toBeLessThanOrEqual(11);
    expect((await listedKey(replicaA.baseUrl, minted)).limitHits.rate).toBe(10_000);
  });

  it('resolves a report once its count is in the store (read your writes), also under a flood', async () => {
    const store = isolated.open();
    const slowTallies: Tallies = {
      add: async (tally, field, by) => {
        await new Promise((resolve) => setTimeout(resolve, 20));
        return store.tallies.add(tally, field, by);
      },
      claim: (...args) => store.tallies.claim(...args),
      acknowledge: (...args) => store.tallies.acknowledge(...args),
      pending: (...args) => store.tallies.pending(...args),
    };
    const client = createClient(
      KeyService,
      keyService.address,
      testServiceClientOptions('key-service', { defaultUnaryTimeoutMs: 10_000 }),
    );
    const reporter = new LimitHitReporter(client, silentLogger, { tallies: slowTallies });
    const keyId = randomUUID();
    const pendingOf = async (kind: 'rate' | 'spend_cap') => {
      const field = limitHitField(kind, keyId);
      return (await store.tallies.pending(LIMIT_HITS_TALLY, [field])).open[field] ?? 0n;
    };
    // A write is in flight: the next report waits for it, then for the write that carries its count.
    const first = reporter.report(keyId, 'rate');
    await reporter.report(keyId, 'spendCap');
    expect(await pendingOf('spend_cap')).toBe(1n);
    await first;
    // Reports of a flood are written together, and each one resolves only once its own count is written.
    let resolved = 0;
    const flood = Array.from({ length: 500 }, async (_, i) => {
      if (i % 100 === 99) await new Promise((resolve) => setTimeout(resolve, 15));
      await reporter.report(keyId, 'rate');
      resolved += 1;
      expect(await pendingOf('rate')).toBeGreaterThanOrEqual(BigInt(resolved));
    });
    await Promise.all(flood);
    expect(await pendingOf('rate')).toBe(501n);
    await reporter.stop();
    closeClient(client);
  });

  it('bounds the keys waiting for an unreachable store and says so', async () => {
    const lines: string[] = [];
    const logger = createLogger({
      service: 'gateway-test',
      level: 'warn',
      destination: { write: (line: string) => lines.push(line) },
    });
    const down: Tallies = {
      add: () => Promise.reject(new StoreUnavailableError('tallies.add')),
      claim: () => Promise.reject(new StoreUnavailableError('tallies.claim')),
      acknowledge: () => Promise.reject(new StoreUnavailableError('tallies.acknowledge')),
      pending: () => Promise.reject(new StoreUnavailableError('tallies.pending')),
    };
    const client = createClient(
      KeyService,
      keyService.address,
      testServiceClientOptions('key-service', { defaultUnaryTimeoutMs: 10_000 }),
    );
    const reporter = new LimitHitReporter(client, logger, { tallies: down, maxUnsent: 100 });
    const reports = Array.from({ length: 5_000 }, (_, i) => reporter.report(`key-${i % 1_000}`, 'rate'));
    // A refusal is answered whether or not its count could be written (or kept).
    await expect(Promise.all(reports)).resolves.toHaveLength(5_000);
    await reporter.stop();
    closeClient(client);
    const messages = lines.map((line) => JSON.parse(line) as { msg: string; unsentKeys?: number });
    expect(messages.filter((m) => m.msg.startsWith('limit hits are not reaching the store'))).toHaveLength(1);
    expect(
      messages.find((m) => m.msg === 'stopped with limit hits that never reached the store'),
    ).toMatchObject({
      unsentKeys: 100,
    });
  });
});
