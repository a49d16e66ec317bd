import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { LIMIT_HITS_TALLY, limitHitField } from '@svc/platform';
import { createTestDatabase } from '@svc/testkit';
import { call } from '../support/http.js';
import { runKeyServiceOn, type RunningKeyService } from '../support/key-service-target.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey, type MintedKey } from './support/keys.js';
import { FEE_WEI, ScriptedBackend } from './support/scripted-backend.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

// Issue: a key refused `402 spend_cap_exceeded` and listed at once showed `limitHits.spendCap` 0, and 1 only
// after the next flush. Refusals are still written to PostgreSQL in batches, but a listing adds what the
// store holds, not yet applied, so it shows every refusal answered before it, exactly once, on any replica.

const RATE_LIMIT = 3;

let redis: TestStore;
// Two key-service replicas over one database, each behind its own gateway replica; all share one Redis.
let keyServiceA: RunningKeyService;
let keyServiceB: RunningKeyService;
let backend: ScriptedBackend;
// Gateways that never flush within a test: a refusal reaches a listing only through the store.
let gatewayA: V1Gateway;
let gatewayB: V1Gateway;

const env = {
  V1_KEY_RATE_LIMIT: String(RATE_LIMIT),
  V1_KEY_RATE_WINDOW: '1h',
  V1_KEY_CONCURRENCY_LIMIT: '1',
  KEY_ROUTES_RATE_LIMIT: '100000',
  V1_LIMIT_HIT_FLUSH_INTERVAL: '1h',
};

beforeAll(async () => {
  redis = createTestStore();
  const database = await createTestDatabase({ prefix: 'gw' });
  keyServiceA = await runKeyServiceOn(redis.open(), database);
  // The second replica leaves the database to the first, which drops it.
  keyServiceB = await runKeyServiceOn(redis.open(), { url: database.url, drop: async () => undefined });
  backend = new ScriptedBackend();
  gatewayA = await startV1Gateway({
    keyServiceAddress: keyServiceA.address,
    store: redis.open(),
    completions: backend,
    env,
  });
  gatewayB = await startV1Gateway({
    keyServiceAddress: keyServiceB.address,
    store: redis.open(),
    completions: backend,
    env,
  });
});

afterAll(async () => {
  backend?.releaseHeld();
  await Promise.all([gatewayA?.close(), gatewayB?.close()]);
  await keyServiceB?.close();
  await keyServiceA?.close();
  await redis?.cleanup();
});

const hello = [{ role: 'user' as const, content: 'hello' }];

function complete(gateway: V1Gateway, minted: MintedKey, model = 'echo:1b') {
  return call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
    token: minted.key,
    body: { model, messages: hello },
  });
}

function models(gateway: V1Gateway, minted: MintedKey) {
  return call(gateway.baseUrl, 'GET', '/v1/models', { token: minted.key });
}

function errorCode(answer: { body: unknown }): string | undefined {
  return (answer.body as { error?: { code?: string } } | undefined)?.error?.code;
}

describe('a refusal listed at once (read your writes)', () => {
  it('shows a spend-cap refusal in limitHits.spendCap in the listing right after the 402', async () => {
    const minted = await mintKey(gatewayA.baseUrl, { spendCapWei: String(FEE_WEI - 1n) });
    const refused = await complete(gatewayA, minted);
    expect(refused.status).toBe(402);
    expect(errorCode(refused)).toBe('spend_cap_exceeded');
    expect((await listedKey(gatewayA.baseUrl, minted)).limitHits).toEqual({
      rate: 0,
      concurrency: 0,
      spendCap: 1,
      sessionOpens: 0,
    });
    await complete(gatewayA, minted);
    expect((await listedKey(gatewayA.baseUrl, minted)).limitHits.spendCap).toBe(2);
  });

  it('shows rate and concurrency refusals in the listing right after the 429', async () => {
    const minted = await mintKey(gatewayA.baseUrl);
    for (let i = 0; i < RATE_LIMIT; i += 1) expect((await models(gatewayA, minted)).status).toBe(200);
    const refused = await models(gatewayA, minted);
    expect(refused.status).toBe(429);
    expect(errorCode(refused)).toBe('rate_limit_exceeded');
    expect((await listedKey(gatewayA.baseUrl, minted)).limitHits.rate).toBe(1);

    const other = await mintKey(gatewayA.baseUrl);
    const held = complete(gatewayA, other, 'hold');
    await waitUntilHolding(1);
    const busy = await complete(gatewayA, other);
    expect(busy.status).toBe(429);
    expect(errorCode(busy)).toBe('concurrency_limit_exceeded');
    expect((await listedKey(gatewayA.baseUrl, other)).limitHits).toMatchObject({ rate: 0, concurrency: 1 });
    backend.releaseHeld();
    expect((await held).status).toBe(200);
  });

  it('shows a refusal answered by one replica in a listing served by the other, at once', async () => {
    const minted = await mintKey(gatewayA.baseUrl, { spendCapWei: String(FEE_WEI - 1n) });
    expect((await complete(gatewayA, minted)).status).toBe(402);
    expect((await listedKey(gatewayB.baseUrl, minted)).limitHits.spendCap).toBe(1);
    expect((await complete(gatewayB, minted)).status).toBe(402);
    expect((await listedKey(gatewayA.baseUrl, minted)).limitHits.spendCap).toBe(2);
    expect((await listedKey(gatewayB.baseUrl, minted)).limitHits.spendCap).toBe(2);
  });
});

async function waitUntilHolding(count: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (backend.holding.size < count) {
    if (Date.now() > deadline) throw new Error(`no ${count} held calls within 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('listings while refusals are counted and flushed on two replicas', () => {
  // Gateways that flush every 20 ms, so batches are sealed, applied and acknowledged all through the test.
  let flushingA: V1Gateway;
  let flushingB: V1Gateway;
  let stopped = false;

  beforeAll(async () => {
    const flushing = { ...env, V1_KEY_RATE_LIMIT: '1', V1_LIMIT_HIT_FLUSH_INTERVAL: '20ms' };
    flushingA = await startV1Gateway({
      keyServiceAddress: keyServiceA.address,
      store: redis.open(),
      env: flushing,
    });
    flushingB = await startV1Gateway({
      keyServiceAddress: keyServiceB.address,
      store: redis.open(),
      env: flushing,
    });
  });

  afterAll(async () => {
    if (!stopped) await Promise.all([flushingA?.close(), flushingB?.close()]);
  });

  it('never shows a refusal twice or not at all, and ends at the exact count', async () => {
    const minted = await mintKey(flushingA.baseUrl);
    // The one call the rate allows; every call after it is refused and counted.
    expect((await models(flushingA, minted)).status).toBe(200);
    const gateways = [flushingA, flushingB];
    let sent = 0;
    let refused = 0;
    let running = true;
    const batchesBefore = batchCalls(gateways);

    const refusing = async (offset: number) => {
      for (let i = offset; running; i += 1) {
        sent += 1;
        const answer = await models(gateways[i % 2]!, minted);
        expect(answer.status).toBe(429);
        refused += 1;
      }
    };
    const listings: Array<{ atLeast: number; seen: number; atMost: number }> = [];
    const listing = async (gateway: V1Gateway) => {
      let last = 0;
      while (running) {
        const atLeast = refused;
        const seen = (await listedKey(gateway.baseUrl, minted)).limitHits.rate;
        listings.push({ atLeast, seen, atMost: sent });
        expect(seen).toBeGreaterThanOrEqual(last);
        last = seen;
      }
    };
    const background = [refusing(0), refusing(1), refusing(0), listing(flushingA), listing(flushingB)];
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    running = false;
    await Promise.all(background);

    // Each listing shows every refusal answered before it was asked for, and none counted twice.
    for (const { atLeast, seen, atMost } of listings) {
      expect(seen).toBeGreaterThanOrEqual(atLeast);
      expect(seen).toBeLessThanOrEqual(atMost);
    }
    expect(listings.length).toBeGreaterThan(20);
    // The flushes really ran between the listings.
    expect(batchCalls(gateways) - batchesBefore).toBeGreaterThan(10);
    expect((await listedKey(flushingB.baseUrl, minted)).limitHits.rate).toBe(refused);
    // Once both replicas stopped and flushed for the last time, the table alone holds the same.
    stopped = true;
    await Promise.all([flushingA.close(), flushingB.close()]);
    expect(await redis.open().tallies.pending(LIMIT_HITS_TALLY, [limitHitField('rate', minted.id)])).toEqual({
      open: {},
      sealed: null,
    });
    expect((await listedKey(gatewayA.baseUrl, minted)).limitHits.rate).toBe(refused);
  });
});

function batchCalls(gateways: V1Gateway[]): number {
  return gateways.reduce((sum, gateway) => sum + (gateway.keyServiceCalls.get('recordLimitHits') ?? 0), 0);
}
