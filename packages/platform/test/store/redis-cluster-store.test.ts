import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis, type Cluster } from 'ioredis';
import {
  deleteKeysUnder,
  openRedisClient,
  RedisStore,
  type RedisClient,
  type Store,
} from '../../src/store/index.js';
import { parseRedisClusterUrl } from '../../src/store/redis/redis-url.js';
import { describeStoreContract } from './store-contract.js';

// The local three-primary cluster scripts/redis-cluster.sh starts (scripts/ensure-services.sh runs it).
const REDIS_CLUSTER_URL =
  process.env.REDIS_CLUSTER_URL ?? 'redis+cluster://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003';
const NAMESPACE = `svc-test:store-cluster:${randomUUID()}`;

/** Fails, naming the script that starts it, unless a whole cluster answers on the URL's first node. */
async function requireCluster(): Promise<void> {
  const [first] = parseRedisClusterUrl(REDIS_CLUSTER_URL).nodes;
  const probe = new Redis({
    host: first?.host,
    port: first?.port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  probe.on('error', () => undefined);
  let info = '';
  try {
    await probe.connect();
    info = String(await probe.call('CLUSTER', 'INFO'));
  } catch {
    // Reported below.
  } finally {
    probe.disconnect();
  }
  if (!info.includes('cluster_state:ok')) {
    throw new Error(
      `no Redis Cluster answers at ${REDIS_CLUSTER_URL}: start it with scripts/redis-cluster.sh ` +
        '(scripts/ensure-services.sh runs it), or set REDIS_CLUSTER_URL',
    );
  }
}

describeStoreContract('RedisStore on a Redis Cluster', async () => {
  await requireCluster();
  // As on one server: one store opening its own cluster client from the URL (coalescing its writes), one over
  // a cluster client it is handed.
  const handedClient = openRedisClient(REDIS_CLUSTER_URL);
  const first = new RedisStore({ redis: REDIS_CLUSTER_URL, namespace: NAMESPACE, maxBlockingReaders: 8 });
  const second = new RedisStore({ redis: handedClient, namespace: NAMESPACE, maxBlockingReaders: 8 });
  const scratch: Store[] = [];
  return {
    replicas: [first, second],
    openScratch: async () => {
      const own = new RedisStore({ redis: REDIS_CLUSTER_URL, namespace: NAMESPACE });
      scratch.push(own);
      return own;
    },
    dispose: async () => {
      await Promise.all([first, second, ...scratch].map((s) => s.close()));
      await deleteKeysUnder(handedClient, NAMESPACE);
      await handedClient.quit();
    },
  };
});

describe('RedisStore on a Redis Cluster', () => {
  const namespace = `${NAMESPACE}:own`;
  let admin: RedisClient;
  let store: RedisStore;

  beforeAll(async () => {
    await requireCluster();
    admin = openRedisClient(REDIS_CLUSTER_URL);
    store = new RedisStore({ redis: REDIS_CLUSTER_URL, namespace });
  });

  afterAll(async () => {
    await store?.close();
    if (admin !== undefined) {
      await deleteKeysUnder(admin, namespace);
      await admin.quit();
    }
  });

  /** How many of the namespace's keys each primary holds. */
  async function keysPerPrimary(): Promise<number[]> {
    const primaries = (admin as Cluster).nodes('master');
    return Promise.all(primaries.map(async (primary) => (await primary.keys(`${namespace}:*`)).length));
  }

  it('is a cluster client with three primaries', async () => {
    await store.ping();
    expect(admin.isCluster).toBe(true);
    expect((admin as Cluster).nodes('master')).toHaveLength(3);
  });

  it("spreads the store's keys over every primary, each operation's keys in one slot", async () => {
    for (let i = 0; i < 30; i++) {
      const id = `k${i}`;
      await store.revocations.mark(id);
      await store.revocations.hitByMarker(id, {
        ifClear: { key: `v1:key:{${id}}`, limit: 5, windowMs: 60_000 },
        ifMarked: { key: `bad:${id}`, limit: 5, windowMs: 60_000 },
      });
      await store.frames.append(`job-${i}`, '1:0', new Uint8Array([i]));
      await store.presence.announce(`group-${i}`, 'm', 'v', 60_000);
      await store.tallies.add(`tally-${i}`, 'f');
      await store.tallies.claim(`tally-${i}`, 'c', { claimTtlMs: 60_000 });
    }
    const perPrimary = await keysPerPrimary();
    expect(perPrimary.every((count) => count > 0)).toBe(true);
    // No key of the set earlier single-server releases kept: a cluster never had it.
    expect(await admin.exists(`${namespace}:revoked`)).toBe(0);
  });

  it('serves a blocked frame read from a connection of its own while other calls go on', async () => {
    const stream = `job-${randomUUID()}`;
    const reading = store.frames.read(stream, null, { blockMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await store.values.set('during-read', 'ok', 60_000);
    expect(await store.values.get('during-read')).toBe('ok');
    await store.frames.append(stream, '1:0', new Uint8Array([7]));
    expect((await reading).map((frame) => frame.dedupId)).toEqual(['1:0']);
  });

  it('deletes a namespace from every primary', async () => {
    await store.values.set('to-delete', 'x', 60_000);
    expect((await keysPerPrimary()).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    await deleteKeysUnder(admin, namespace);
    expect(await keysPerPrimary()).toEqual([0, 0, 0]);
  });
});

describe('Redis Cluster URLs', () => {
  it('reads the startup nodes, credentials and TLS from a redis+cluster URL', () => {
    expect(parseRedisClusterUrl('redis+cluster://a.example:7001,b.example,[::1]:7003')).toEqual({
      nodes: [
        { host: 'a.example', port: 7001 },
        { host: 'b.example', port: 6379 },
        { host: '::1', port: 7003 },
      ],
      username: undefined,
      password: undefined,
      tls: false,
    });
    expect(parseRedisClusterUrl('rediss+cluster://svc:p%40ss@h:7001')).toMatchObject({
      username: 'svc',
      password: 'p@ss',
      tls: true,
    });
    expect(parseRedisClusterUrl('redis+cluster://:secret@h:7001')).toMatchObject({
      username: undefined,
      password: 'secret',
    });
  });

  it('refuses a database number, a query or an empty host list', () => {
    for (const url of [
      'redis+cluster://h:7001/2',
      'redis+cluster://h:7001?x=1',
      'redis+cluster://',
      'redis+cluster://h:x',
    ])
      expect(() => parseRedisClusterUrl(url)).toThrow(RangeError);
  });
});
