import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Redis } from 'ioredis';
import {
  deleteKeysUnder,
  RedisStore,
  StoreCommandError,
  StoreUnavailableError,
  type Store,
} from '../../src/store/index.js';
import { describeStoreContract } from './store-contract.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
// One namespace per run, so parallel suites and earlier runs on the same server never meet.
const NAMESPACE = `svc-test:store:${randomUUID()}`;

async function deleteNamespace(redis: Redis, namespace: string): Promise<void> {
  await deleteKeysUnder(redis, namespace);
}

describeStoreContract('RedisStore', async () => {
  // Two replicas: one store opening its own connection from the URL (coalescing its writes, as services run
  // it), one over a client it is handed (writing each command at once), so the contract holds for both.
  const handedClient = new Redis(REDIS_URL);
  const first = new RedisStore({ redis: REDIS_URL, namespace: NAMESPACE, maxBlockingReaders: 8 });
  const second = new RedisStore({ redis: handedClient, namespace: NAMESPACE, maxBlockingReaders: 8 });
  const scratch: Store[] = [];
  return {
    replicas: [first, second],
    openScratch: async () => {
      const own = new RedisStore({ redis: REDIS_URL, namespace: NAMESPACE });
      scratch.push(own);
      return own;
    },
    dispose: async () => {
      await Promise.all([first, second, ...scratch].map((s) => s.close()));
      await deleteNamespace(handedClient, NAMESPACE);
      await handedClient.quit();
    },
  };
});

describe('RedisStore on a real Redis', () => {
  let admin: Redis;
  let store: RedisStore;

  beforeAll(() => {
    admin = new Redis(REDIS_URL);
    store = new RedisStore({ redis: REDIS_URL, namespace: `${NAMESPACE}:own` });
  });

  afterAll(async () => {
    await store.close();
    await deleteNamespace(admin, `${NAMESPACE}:own`);
    await deleteNamespace(admin, `${NAMESPACE}:other`);
    await admin.quit();
  });

  it('keeps namespaces apart on one server', async () => {
    const other = new RedisStore({ redis: admin, namespace: `${NAMESPACE}:other` });
    await store.values.set('shared-name', 'mine', 60_000);
    await store.revocations.mark('key-1');
    expect(await other.values.get('shared-name')).toBeNull();
    expect(await other.revocations.isMarked('key-1')).toBe(false);
    await other.close();
  });

  it('hands out an entry it did not write (added by hand) with an empty payload, for the reader to remove', async () => {
    await admin.xadd(`${NAMESPACE}:own:queue:{by-hand}`, '*', 'x', 'not ours');
    await store.queues.push('by-hand', new Uint8Array([7]), 10);
    const entries = await store.queues.peek('by-hand', 10);
    expect(entries.map((entry) => [...entry.payload])).toEqual([[], [7]]);
    await store.queues.remove('by-hand', [entries[0]!.id]);
    expect(await store.queues.length('by-hand')).toBe(1);
  });

  it('writes only under its namespace', async () => {
    const namespace = `${NAMESPACE}:own`;
    await store.counters.increment('c', 'f');
    await store.frames.append('job-1', '1:0', new Uint8Array([1]));
    await store.presence.announce('workers', 'w', 'v', 60_000);
    await store.tallies.add('limit-hits', 'rate:k');
    await store.tallies.claim('limit-hits', 'flusher', { claimTtlMs: 60_000 });
    await store.tallies.add('limit-hits', 'rate:k');
    expect(await admin.exists(`${namespace}:counters:c`)).toBe(1);
    expect(
      await admin.exists(
        `${namespace}:tally:{limit-hits}:open`,
        `${namespace}:tally:{limit-hits}:sealed`,
        `${namespace}:tally:{limit-hits}:batch`,
        `${namespace}:tally:{limit-hits}:claim`,
      ),
    ).toBe(4);
    expect(await admin.exists(`${namespace}:frames:{job-1}`, `${namespace}:frames:{job-1}:dedup`)).toBe(2);
    expect(await admin.exists(`${namespace}:presence:{workers}:expiries`)).toBe(1);
  });

  it('leaves a client it was handed open when it closes', async () => {
    const handed = new Redis(REDIS_URL);
    const borrowing = new RedisStore({ redis: handed, namespace: `${NAMESPACE}:other` });
    await borrowing.ping();
    await borrowing.close();
    expect(await handed.ping()).toBe('PONG');
    await handed.quit();
  });

  it('serves other calls on its shared connection while a read is blocked', async () => {
    const stream = `job-${randomUUID()}`;
    let readSettled = false;
    const reading = store.frames.read(stream, null, { blockMs: 10_000 }).finally(() => {
      readSettled = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await store.values.set('during-read', 'ok', 60_000);
    expect(await store.values.get('during-read')).toBe('ok');
    await store.ping();
    expect(readSettled).toBe(false);
    await store.frames.append(stream, '1:0', new Uint8Array([7]));
    expect((await reading).map((f) => f.dedupId)).toEqual(['1:0']);
  });

  it('queues blocked readers beyond its connection limit instead of failing them', async () => {
    const narrow = new RedisStore({ redis: REDIS_URL, namespace: `${NAMESPACE}:own`, maxBlockingReaders: 1 });
    const streams = ['a', 'b', 'c'].map((name) => `job-${name}-${randomUUID()}`);
    const readers = streams.map((stream) => narrow.frames.read(stream, null, { blockMs: 10_000 }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    for (const stream of streams) await store.frames.append(stream, '1:0', new Uint8Array([1]));
    expect((await Promise.all(readers)).map((frames) => frames.length)).toEqual([1, 1, 1]);
    await narrow.close();
  });

  it('keeps the dedup ids of a stream for as long as the stream', async () => {
    const namespace = `${NAMESPACE}:own`;
    await store.frames.append('job-ttl', '1:0', new Uint8Array([1]));
    await store.frames.expire('job-ttl', 60_000);
    await store.frames.append('job-ttl', '1:1', new Uint8Array([2]));
    const dedupTtl = await admin.pttl(`${namespace}:frames:{job-ttl}:dedup`);
    expect(dedupTtl).toBeGreaterThan(50_000);
    expect(dedupTtl).toBeLessThanOrEqual(60_000);
  });

  it('keeps revocation markers without expiry, per id and in the set earlier releases read', async () => {
    await store.revocations.mark('key-permanent');
    expect(await admin.pttl(`${NAMESPACE}:own:revoked:{key-permanent}`)).toBe(-1);
    expect(await admin.sismember(`${NAMESPACE}:own:revoked`, 'key-permanent')).toBe(1);
    expect(await admin.pttl(`${NAMESPACE}:own:revoked`)).toBe(-1);
  });

  it('honours a revocation an earlier release wrote only in its set (a rolling upgrade)', async () => {
    const id = `key-${randomUUID()}`;
    await admin.sadd(`${NAMESPACE}:own:revoked`, id);
    expect(await store.revocations.isMarked(id)).toBe(true);
    expect(await store.revocations.markedAmong([id, `${id}-other`])).toEqual(new Set([id]));
    const windows = {
      ifClear: { key: `clear-${id}`, limit: 5, windowMs: 60_000 },
      ifMarked: { key: `marked-${id}`, limit: 5, windowMs: 60_000 },
    };
    expect(await store.revocations.hitByMarker(id, windows)).toMatchObject({
      marked: true,
      verdict: { limit: 5, remaining: 4 },
    });
  });

  it('refuses a namespace with a hash tag in it', () => {
    expect(() => new RedisStore({ redis: admin, namespace: 'svc-{test}' })).toThrow(RangeError);
  });

  it('sends the commands of one turn of the event loop in one write, in order, each answered as its own', async () => {
    const handed = new Redis(REDIS_URL);
    const coalescing = new RedisStore({ redis: handed, namespace: `${NAMESPACE}:own`, coalesceWrites: true });
    await coalescing.ping();
    const socket = handed.stream;
    let writes = 0;
    const countWrites = () => (writes += 1);
    const write = socket._write.bind(socket);
    const writev = socket._writev?.bind(socket);
    socket._write = (...args: Parameters<typeof socket._write>) => (countWrites(), write(...args));
    if (writev)
      socket._writev = (...args: Parameters<NonNullable<typeof socket._writev>>) => (
        countWrites(),
        writev(...args)
      );
    const key = `turn-${randomUUID()}`;
    // Not awaited one by one: all issued in this turn, the get after the set it must see.
    const [, value, verdicts, marked] = await Promise.all([
      coalescing.values.set(key, 'first', 60_000),
      coalescing.values.get(key),
      Promise.all(Array.from({ length: 5 }, () => coalescing.rateWindows.hit(key, 3, 60_000))),
      coalescing.revocations.isMarked(key),
    ]);
    expect(writes).toBe(1);
    expect(value).toBe('first');
    expect(verdicts.map((verdict) => verdict.allowed)).toEqual([true, true, true, false, false]);
    expect(marked).toBe(false);
    // The next turn is corked and sent on its own again.
    expect(await coalescing.values.get(key)).toBe('first');
    expect(writes).toBe(2);
    await coalescing.close();
    await handed.quit();
  });

  /** Subscribers of each channel on the server (PUBSUB NUMSUB). */
  async function subscribersOf(...channels: string[]): Promise<number[]> {
    const reply = (await admin.call('PUBSUB', 'NUMSUB', ...channels)) as Array<string | number>;
    return channels.map((_, index) => Number(reply[index * 2 + 1]));
  }

  /** Ids of the server's subscriber connections (CLIENT LIST TYPE pubsub). */
  async function pubsubClientIds(): Promise<Set<string>> {
    const list = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
    return new Set([...list.matchAll(/^id=(\d+) /gm)].map((match) => match[1] as string));
  }

  async function until(condition: () => Promise<boolean>, what: string): Promise<void> {
    const deadline = Date.now() + 5_000;
    while (!(await condition())) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('subscribes on one connection of its own, once per channel, under its namespace, until the last listener goes', async () => {
    const subscribing = new RedisStore({ redis: REDIS_URL, namespace: `${NAMESPACE}:own` });
    const [one, two] = [`ch-${randomUUID()}`, `ch-${randomUUID()}`];
    const [oneName, twoName] = [subscribing.keyspace.channel(one), subscribing.keyspace.channel(two)];
    expect(oneName).toBe(`${NAMESPACE}:own:channel:${one}`);
    const before = await pubsubClientIds();
    const unsubscribes = await Promise.all([
      subscribing.channels.subscribe(one, () => undefined),
      subscribing.channels.subscribe(one, () => undefined),
      subscribing.channels.subscribe(two, () => undefined),
    ]);
    const added = [...(await pubsubClientIds())].filter((id) => !before.has(id));
    expect(added).toHaveLength(1);
    expect(await subscribersOf(oneName, twoName)).toEqual([1, 1]);
    await unsubscribes[0]!();
    expect(await subscribersOf(oneName, twoName)).toEqual([1, 1]);
    await unsubscribes[1]!();
    await unsubscribes[2]!();
    expect(await subscribersOf(oneName, twoName)).toEqual([0, 0]);
    await subscribing.close();
  });

  it('subscribes again after its subscriber connection was lost, and delivers what is published then', async () => {
    const subscribing = new RedisStore({ redis: REDIS_URL, namespace: `${NAMESPACE}:own` });
    const channel = `ch-${randomUUID()}`;
    const received: string[] = [];
    const before = await pubsubClientIds();
    const unsubscribe = await subscribing.channels.subscribe(channel, (payload) =>
      received.push(Buffer.from(payload).toString()),
    );
    const [connection] = [...(await pubsubClientIds())].filter((id) => !before.has(id));
    await admin.call('CLIENT', 'KILL', 'ID', connection!);
    const name = subscribing.keyspace.channel(channel);
    await until(
      async () => (await subscribersOf(name))[0] === 1 && !(await pubsubClientIds()).has(connection!),
      'resubscribed',
    );
    await store.channels.publish(channel, new TextEncoder().encode('after reconnect'));
    await until(async () => received.length > 0, 'the message arrived');
    expect(received).toEqual(['after reconnect']);
    await unsubscribe();
    await subscribing.close();
  });

  it('reloads its scripts after the server forgot them', async () => {
    await store.rateWindows.hit('after-flush', 5, 60_000);
    await admin.script('FLUSH');
    expect((await store.rateWindows.hit('after-flush', 5, 60_000)).remaining).toBe(3);
  });

  it('reports a command Redis refuses as StoreCommandError naming the operation', async () => {
    await admin.rpush(store.keyspace.value('not-a-string'), 'x');
    const failure = store.values.get('not-a-string');
    await expect(failure).rejects.toThrow(StoreCommandError);
    await expect(failure).rejects.toMatchObject({ operation: 'values.get' });
  });

  it('reports an unreachable server as StoreUnavailableError', async () => {
    const unreachable = new Redis({
      port: 1,
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    unreachable.on('error', () => undefined);
    const down = new RedisStore({ redis: unreachable, namespace: `${NAMESPACE}:down` });
    await expect(down.ping()).rejects.toThrow(StoreUnavailableError);
    await expect(down.nonces.allocate('0xsender', 0)).rejects.toThrow(StoreUnavailableError);
    await expect(down.channels.publish('hints', new Uint8Array([1]))).rejects.toThrow(StoreUnavailableError);
    await expect(down.channels.subscribe('hints', () => undefined)).rejects.toThrow(StoreUnavailableError);
    await down.close();
    unreachable.disconnect();
  });
});
