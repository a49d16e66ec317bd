import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, waitFor, type TestDatabase } from '@svc/testkit';
import { KeyEventKind, type KeyEvent } from '@svc/proto/gen/svc/events/v1/key_event_pb';
import { setTimeout as sleep } from 'node:timers/promises';
import { applyMigrations } from '../src/db/migrate.js';
import { OutboxRelay } from '../src/events/outbox-relay.js';
import { EmbeddedEventBus, type EventBus, keyEventsTopic } from '@svc/platform';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { silentLogger, startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

let database: TestDatabase;
let redis: TestStore;
let bus: EmbeddedEventBus;
let replicas: KeyServiceReplica[];
const received: KeyEvent[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  bus = new EmbeddedEventBus();
  await bus.subscribe(keyEventsTopic, {
    group: 'outbox-test',
    fromBeginning: true,
    handler: async (event) => {
      received.push(event.message);
    },
  });
  const signing = await generateSigningKey();
  const tokenKeys = new TokenKeyRing(signing.key, [signing.verification]);
  // Three replicas relaying the one outbox onto the one bus.
  replicas = await Promise.all(
    Array.from({ length: 3 }, () =>
      startReplica({
        databaseUrl: database.url,
        store: redis.open(),
        tokenKeys,
        bus,
        env: { OUTBOX_POLL_INTERVAL: '50ms' },
      }),
    ),
  );
});

afterAll(async () => {
  await Promise.all((replicas ?? []).map((replica) => replica.close()));
  await bus?.close();
  await redis?.cleanup();
  await database?.drop();
});

async function eventsFor(keyIds: string[], count: number): Promise<KeyEvent[]> {
  const ofKeys = () => received.filter((event) => keyIds.includes(event.keyId));
  await waitFor(() => ofKeys().length >= count || undefined, { what: `${count} events` });
  await sleep(200); // let duplicates, if any, arrive
  return ofKeys();
}

describe('key events', () => {
  it('publishes minted, cap changed, revoked and deleted, in order, with the key fields', async () => {
    const wallet = randomWallet().address;
    const [replica] = replicas;
    const signInToken = await replica!.tokenFor(wallet);
    const minted = await replica!.client.mintKey({ signInToken, spendCapWei: { decimal: '5' } });
    const keyId = minted.apiKey!.id;
    await replica!.client.updateSpendCap({
      signInToken,
      keyId,
      spendCap: { case: 'noCap', value: {} },
    });
    await replica!.client.revokeKey({ signInToken, keyId });
    await replica!.client.revokeKey({ signInToken, keyId }); // no change, no event
    await replica!.client.deleteKey({ signInToken, keyId });

    const events = await eventsFor([keyId], 4);
    expect(events.map((event) => event.kind)).toEqual([
      KeyEventKind.MINTED,
      KeyEventKind.CAP_CHANGED,
      KeyEventKind.REVOKED,
      KeyEventKind.DELETED,
    ]);
    expect(events[0]).toMatchObject({
      wallet: { hex: wallet },
      keyId,
      prefix: minted.apiKey!.prefix,
      spendCapWei: { decimal: '5' },
    });
    expect(events[1]!.spendCapWei).toBeUndefined();
    expect(new Set(events.map((event) => event.eventId)).size).toBe(4);
  });

  it('keeps each wallet in order, once, while three replicas change keys and relay at the same time', async () => {
    const wallets = Array.from({ length: 4 }, () => randomWallet().address);
    const keyIds: string[] = [];
    await Promise.all(
      wallets.map(async (wallet, walletIndex) => {
        // One token per wallet, used on every replica (they share the token keys, as a deployment's do).
        const signInToken = await replicas[0]!.tokenFor(wallet);
        for (let round = 0; round < 3; round += 1) {
          const replica = replicas[(walletIndex + round) % replicas.length]!;
          const minted = await replica.client.mintKey({ signInToken });
          keyIds.push(minted.apiKey!.id);
          await replica.client.revokeKey({ signInToken, keyId: minted.apiKey!.id });
        }
      }),
    );
    const events = await eventsFor(keyIds, wallets.length * 6);
    expect(events).toHaveLength(wallets.length * 6);
    for (const wallet of wallets) {
      const ofWallet = events.filter((event) => event.wallet?.hex === wallet);
      const rows = await replicas[0]!.db.keyEventOutbox.findMany({
        where: { wallet: wallet.toLowerCase() },
        orderBy: { sequence: 'asc' },
        select: { eventId: true },
      });
      expect(ofWallet.map((event) => event.eventId)).toEqual(rows.map((row) => row.eventId));
    }
  });

  it('writes no event for a refused change', async () => {
    const signInToken = await replicas[0]!.tokenFor(randomWallet().address);
    const before = await replicas[0]!.db.keyEventOutbox.count();
    await expect(replicas[0]!.client.mintKey({ signInToken, name: 'x'.repeat(65) })).rejects.toBeDefined();
    await expect(
      replicas[0]!.client.revokeKey({
        signInToken,
        keyId: '00000000-0000-4000-8000-000000000000',
      }),
    ).rejects.toBeDefined();
    expect(await replicas[0]!.db.keyEventOutbox.count()).toBe(before);
  });
});

describe('relay', () => {
  it('keeps events whose publication failed and publishes them on a later pass', async () => {
    const failing: EventBus = {
      ensureTopics: () => Promise.resolve(),
      publish: () => Promise.reject(new Error('broker down')),
      publishBatch: () => Promise.reject(new Error('broker down')),
      subscribe: () => Promise.reject(new Error('broker down')),
      health: () => [],
      close: () => Promise.resolve(),
    };
    // A replica without background work, so only the relays below publish its change.
    const quiet = await startReplica({
      databaseUrl: database.url,
      store: redis.open(),
      tokenKeys: replicas[0]!.service.domain.tokenKeys,
      bus,
      startBackground: false,
    });
    try {
      await Promise.all(replicas.map((replica) => replica.service.stop()));
      const minted = await quiet.client.mintKey({
        signInToken: await quiet.tokenFor(randomWallet().address),
      });
      const broken = new OutboxRelay(
        quiet.db,
        failing,
        { pollIntervalMs: 1000, batchSize: 10 },
        silentLogger,
      );
      await expect(broken.publishBatch()).rejects.toThrow('broker down');
      const pending = await quiet.db.keyEventOutbox.count({ where: { publishedAt: null } });
      expect(pending).toBeGreaterThanOrEqual(1);

      const working = new OutboxRelay(quiet.db, bus, { pollIntervalMs: 1000, batchSize: 10 }, silentLogger);
      await working.drain();
      expect(await quiet.db.keyEventOutbox.count({ where: { publishedAt: null } })).toBe(0);
      const events = await eventsFor([minted.apiKey!.id], 1);
      expect(events.map((event) => event.kind)).toEqual([KeyEventKind.MINTED]);
    } finally {
      await quiet.close();
    }
  });
});
