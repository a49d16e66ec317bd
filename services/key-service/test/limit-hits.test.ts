import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import { LimitKind } from '@svc/proto/gen/svc/key/v1/api_key_pb';
import { randomUUID } from 'node:crypto';
import { applyMigrations } from '../src/db/migrate.js';
import { generateSigningKey, TokenKeyRing } from '../src/signin/token-key-ring.js';
import { errorCodeOf } from './support/errors.js';
import { startReplica, type KeyServiceReplica } from './support/key-service-harness.js';
import { randomWallet } from './support/sign-in.js';
import { createTestStore, type TestStore } from './support/test-store.js';

let database: TestDatabase;
let redis: TestStore;
// Two replicas over one database: a batch delivered to both at once still counts once.
let replicaA: KeyServiceReplica;
let replicaB: KeyServiceReplica;

beforeAll(async () => {
  database = await createTestDatabase({ prefix: 'ks', migrate: (url) => applyMigrations(url) });
  redis = createTestStore();
  const signing = await generateSigningKey();
  const tokenKeys = new TokenKeyRing(signing.key, [signing.verification]);
  const options = { databaseUrl: database.url, tokenKeys, startBackground: false };
  replicaA = await startReplica({ ...options, store: redis.open() });
  replicaB = await startReplica({ ...options, store: redis.open() });
});

afterAll(async () => {
  await replicaA?.close();
  await replicaB?.close();
  await redis?.cleanup();
  await database?.drop();
});

async function mintKey() {
  const owner = { signInToken: await replicaA.tokenFor(randomWallet().address) };
  const minted = await replicaA.client.mintKey({ signInToken: owner.signInToken });
  return { owner, keyId: minted.apiKey!.id };
}

async function hitsOf(key: { owner: { signInToken: string }; keyId: string }) {
  const listed = (await replicaA.client.listKeys({ signInToken: key.owner.signInToken })).apiKeys;
  const { rate, concurrency, spendCap, sessionOpens } = listed.find((k) => k.id === key.keyId)!.limitHits!;
  return { rate, concurrency, spendCap, sessionOpens };
}

describe('RecordLimitHits', () => {
  it('adds each entry to its key and limit, duplicates of one key and limit summed', async () => {
    const [first, second] = await Promise.all([mintKey(), mintKey()]);
    await replicaA.client.recordLimitHits({
      batchId: randomUUID(),
      hits: [
        { keyId: first.keyId, kind: LimitKind.RATE, count: 250n },
        { keyId: first.keyId, kind: LimitKind.RATE, count: 50n },
        { keyId: first.keyId, kind: LimitKind.CONCURRENCY, count: 3n },
        { keyId: first.keyId, kind: LimitKind.SESSION_OPENS, count: 2n },
        { keyId: second.keyId, kind: LimitKind.SPEND_CAP, count: 7n },
        // Unknown and malformed key ids count nowhere and do not stop the rest.
        { keyId: randomUUID(), kind: LimitKind.RATE, count: 1n },
        { keyId: 'not-a-key', kind: LimitKind.RATE, count: 1n },
      ],
    });
    expect(await hitsOf(first)).toEqual({ rate: 300n, concurrency: 3n, spendCap: 0n, sessionOpens: 2n });
    expect(await hitsOf(second)).toEqual({ rate: 0n, concurrency: 0n, spendCap: 7n, sessionOpens: 0n });
  });

  it('counts a batch once however often it is delivered, also to two replicas at once', async () => {
    const key = await mintKey();
    const batch = { batchId: randomUUID(), hits: [{ keyId: key.keyId, kind: LimitKind.RATE, count: 940n }] };
    await Promise.all(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? replicaA : replicaB).client.recordLimitHits(batch)),
    );
    await replicaB.client.recordLimitHits(batch);
    expect((await hitsOf(key)).rate).toBe(940n);

    // Another batch id is another batch.
    await replicaA.client.recordLimitHits({ ...batch, batchId: randomUUID() });
    expect((await hitsOf(key)).rate).toBe(1_880n);
  });

  it('applies concurrent batches over the same keys in any order without losing one', async () => {
    const keys = await Promise.all(Array.from({ length: 8 }, () => mintKey()));
    await Promise.all(
      Array.from({ length: 24 }, (_, i) => {
        // Each batch lists the keys in another order.
        const ordered = i % 2 === 0 ? keys : [...keys].reverse();
        const rotated = [...ordered.slice(i % keys.length), ...ordered.slice(0, i % keys.length)];
        return (i % 2 === 0 ? replicaA : replicaB).client.recordLimitHits({
          batchId: randomUUID(),
          hits: rotated.map((key) => ({ keyId: key.keyId, kind: LimitKind.CONCURRENCY, count: 5n })),
        });
      }),
    );
    for (const key of keys) expect((await hitsOf(key)).concurrency).toBe(24n * 5n);
  });

  it('refuses a batch without an id, with an unset kind or a zero count, and counts none of it', async () => {
    const key = await mintKey();
    const hit = { keyId: key.keyId, kind: LimitKind.RATE, count: 1n };
    expect(await errorCodeOf(replicaA.client.recordLimitHits({ batchId: '', hits: [hit] }))).toBe(
      'invalid_request',
    );
    expect(
      await errorCodeOf(replicaA.client.recordLimitHits({ batchId: 'x'.repeat(129), hits: [hit] })),
    ).toBe('invalid_request');
    expect(
      await errorCodeOf(
        replicaA.client.recordLimitHits({
          batchId: randomUUID(),
          hits: [hit, { ...hit, kind: LimitKind.UNSPECIFIED }],
        }),
      ),
    ).toBe('invalid_request');
    expect(
      await errorCodeOf(
        replicaA.client.recordLimitHits({ batchId: randomUUID(), hits: [hit, { ...hit, count: 0n }] }),
      ),
    ).toBe('invalid_request');
    expect((await hitsOf(key)).rate).toBe(0n);
  });

  it('forgets batch ids after the retention period, with the report ids', async () => {
    const key = await mintKey();
    const batchId = randomUUID();
    await replicaA.client.recordLimitHits({
      batchId,
      hits: [{ keyId: key.keyId, kind: LimitKind.RATE, count: 1n }],
    });
    await replicaA.db.$executeRaw`
      UPDATE limit_hit_batches SET applied_at = now() - interval '2 days' WHERE batch_id = ${batchId}`;
    expect(await replicaA.service.domain.limitHits.pruneReports(24 * 3_600_000)).toBeGreaterThanOrEqual(1);
    const left = await replicaA.db.$queryRaw<unknown[]>`
      SELECT 1 FROM limit_hit_batches WHERE batch_id = ${batchId}`;
    expect(left).toHaveLength(0);
  });
});
