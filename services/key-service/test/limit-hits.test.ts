import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  LIMIT_HITS_TALLY,
  limitHitField,
  type LimitHitKind,
  type Store,
  type TallyBatch,
  type TallyPending,
} from '@svc/platform';
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

// Gateways count refusals in the store's `limit-hits` tally and deliver it every few seconds; a listing must
// show them at once (read your writes), each exactly once, whatever step of its delivery a batch is at.
describe('listing the refusals still pending in the store', () => {
  let store: Store;

  beforeAll(() => {
    store = redis.open();
  });

  const WIRE_KINDS: Record<LimitHitKind, LimitKind> = {
    rate: LimitKind.RATE,
    concurrency: LimitKind.CONCURRENCY,
    spend_cap: LimitKind.SPEND_CAP,
    session_opens: LimitKind.SESSION_OPENS,
  };

  /** What a gateway does at each refusal. */
  const refuse = (keyId: string, kind: LimitHitKind, count = 1) =>
    store.tallies.add(LIMIT_HITS_TALLY, limitHitField(kind, keyId), count);

  /** Sends a claimed batch as a gateway's flush does. */
  function deliver(batch: TallyBatch, replica = replicaA) {
    return replica.client.recordLimitHits({
      batchId: batch.batchId,
      hits: Object.entries(batch.counts).map(([field, count]) => {
        const [kind, keyId] = field.split(':') as [LimitHitKind, string];
        return { keyId, kind: WIRE_KINDS[kind], count };
      }),
    });
  }

  /** One whole flush: claim, deliver, acknowledge; false when there was nothing to deliver. */
  async function flush(claimant: string, replica = replicaA): Promise<boolean> {
    const batch = await store.tallies.claim(LIMIT_HITS_TALLY, claimant, { claimTtlMs: 30_000 });
    if (batch === null) return false;
    await deliver(batch, replica);
    await store.tallies.acknowledge(LIMIT_HITS_TALLY, batch.batchId);
    return true;
  }

  async function listedHits(key: { owner: { signInToken: string }; keyId: string }, replica = replicaA) {
    const listed = (await replica.client.listKeys({ signInToken: key.owner.signInToken })).apiKeys;
    const { rate, concurrency, spendCap, sessionOpens } = listed.find((k) => k.id === key.keyId)!.limitHits!;
    return { rate, concurrency, spendCap, sessionOpens };
  }

  it('lists refusals counted in the store at once, on every replica, and in the answer to a cap change', async () => {
    const key = await mintKey();
    await refuse(key.keyId, 'spend_cap');
    await refuse(key.keyId, 'rate', 2);
    await refuse(key.keyId, 'concurrency');
    await refuse(key.keyId, 'session_opens', 3);
    const expected = { rate: 2n, concurrency: 1n, spendCap: 1n, sessionOpens: 3n };
    expect(await listedHits(key, replicaA)).toEqual(expected);
    expect(await listedHits(key, replicaB)).toEqual(expected);
    const changed = await replicaB.client.updateSpendCap({
      signInToken: key.owner.signInToken,
      keyId: key.keyId,
      spendCap: { case: 'noCap', value: {} },
    });
    expect(changed.apiKey?.limitHits).toMatchObject(expected);
  });

  it('counts a batch once at every step of its delivery: open, sealed, applied, acknowledged', async () => {
    const key = await mintKey();
    await refuse(key.keyId, 'spend_cap', 3);
    expect((await listedHits(key)).spendCap).toBe(3n);

    const batch = (await store.tallies.claim(LIMIT_HITS_TALLY, 'flusher', { claimTtlMs: 30_000 }))!;
    // Sealed, not yet delivered: still counted from the store.
    expect((await listedHits(key, replicaB)).spendCap).toBe(3n);
    await refuse(key.keyId, 'spend_cap');
    expect((await listedHits(key)).spendCap).toBe(4n);

    // Applied but not yet acknowledged (the gateway has not heard back): counted from the table only.
    await deliver(batch, replicaB);
    expect((await listedHits(key)).spendCap).toBe(4n);
    // A redelivery adds nothing, and the listing still counts the sealed batch once.
    await deliver(batch, replicaA);
    expect((await listedHits(key, replicaB)).spendCap).toBe(4n);

    expect(await store.tallies.acknowledge(LIMIT_HITS_TALLY, batch.batchId)).toBe(true);
    expect((await listedHits(key)).spendCap).toBe(4n);
    while (await flush('flusher'));
    expect(await listedHits(key)).toEqual({ rate: 0n, concurrency: 0n, spendCap: 4n, sessionOpens: 0n });
  });

  it('keeps a batch from being applied between a listing’s store read and its end', async () => {
    // A replica whose store reads wait at a gate: the flush below runs while a listing is past its table
    // read and inside its store read.
    let entered!: () => void;
    const reading = new Promise<void>((resolve) => {
      entered = resolve;
    });
    let open!: () => void;
    const gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const gatedStore = redis.open();
    const gatedTallies = gatedStore.tallies;
    const gated: Store = Object.assign(Object.create(gatedStore) as Store, {
      tallies: {
        add: gatedTallies.add.bind(gatedTallies),
        claim: gatedTallies.claim.bind(gatedTallies),
        acknowledge: gatedTallies.acknowledge.bind(gatedTallies),
        pending: async (tally: string, fields: readonly string[]): Promise<TallyPending> => {
          entered();
          await gate;
          return gatedTallies.pending(tally, fields);
        },
      },
    });
    const gatedReplica = await startReplica({
      databaseUrl: database.url,
      tokenKeys: replicaA.service.domain.tokenKeys,
      store: gated,
      startBackground: false,
    });
    try {
      const key = await mintKey();
      await refuse(key.keyId, 'rate', 5);
      const listing = listedHits(key, gatedReplica);
      await reading;

      // A whole flush on another replica: it seals the 5 refusals, but cannot apply them while the listing
      // holds its turn, so the listing cannot see them in the table as well as open in the store.
      let applied = false;
      const flushing = flush('other-gateway', replicaB).then((delivered) => {
        applied = true;
        return delivered;
      });
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(applied).toBe(false);
      open();
      expect((await listing).rate).toBe(5n);
      expect(await flushing).toBe(true);
      expect((await listedHits(key, gatedReplica)).rate).toBe(5n);
    } finally {
      open();
      await gatedReplica.close();
    }
  });

  it('never shows a refusal twice or not at all while gateways count and flush and replicas list', async () => {
    const key = await mintKey();
    let started = 0n;
    let done = 0n;
    let running = true;
    const counting = (async () => {
      while (running) {
        // Five refusals at once, as a burst of 429s.
        await Promise.all(
          Array.from({ length: 5 }, async () => {
            started += 1n;
            await refuse(key.keyId, 'rate');
            done += 1n;
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    let flushes = 0;
    const flusher = async (claimant: string, replica: typeof replicaA) => {
      while (running) {
        if (await flush(claimant, replica)) flushes += 1;
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    const listings: Array<{ atLeast: bigint; seen: bigint; atMost: bigint }> = [];
    const lister = async (replica: typeof replicaA) => {
      let last = 0n;
      while (running) {
        const atLeast = done;
        const seen = (await listedHits(key, replica)).rate;
        listings.push({ atLeast, seen, atMost: started });
        // Monotonic: a later listing never shows fewer.
        expect(seen).toBeGreaterThanOrEqual(last);
        last = seen;
      }
    };
    const background = [
      counting,
      flusher('gateway-a', replicaA),
      flusher('gateway-b', replicaB),
      lister(replicaA),
      lister(replicaB),
    ];
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    running = false;
    await Promise.all(background);

    // Every refusal done before a listing began is in it, and none it shows was counted twice.
    for (const { atLeast, seen, atMost } of listings) {
      expect(seen).toBeGreaterThanOrEqual(atLeast);
      expect(seen).toBeLessThanOrEqual(atMost);
    }
    expect(listings.length).toBeGreaterThan(20);
    expect(flushes).toBeGreaterThan(10);
    expect((await listedHits(key)).rate).toBe(done);
    while (await flush('gateway-a'));
    expect((await listedHits(key, replicaB)).rate).toBe(done);
  });
});
