import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import type { Store } from '@svc/platform';
import { testServiceClientOptions } from '@svc/platform/testing';
import type { APIError } from 'openai';
import OpenAI, { RateLimitError } from 'openai';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { SpendReservationState } from '@svc/proto/gen/svc/key/v1/spend_reservation_pb';
import { call } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { listedKey, mintKey, type MintedKey } from './support/keys.js';
import { delegatePaymentOf, FEE_WEI, ScriptedBackend } from './support/scripted-backend.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

const RATE_LIMIT = 5;
const CONCURRENCY_LIMIT = 2;
const BAD_KEY_LIMIT = 3;

let redis: TestStore;
let store: Store;
let keyService: RunningKeyService;
let backend: ScriptedBackend;
// Two replicas over one Redis: every limit must hold across them.
let replicaA: V1Gateway;
let replicaB: V1Gateway;

function sdk(apiKey: string, gateway: V1Gateway): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${gateway.baseUrl}/v1`, maxRetries: 0 });
}

const hello = [{ role: 'user' as const, content: 'hello' }];

/** A streamed `hold` call that has received its first chunk; `abort` drops the connection. */
async function openHeldStream(minted: MintedKey, gateway: V1Gateway) {
  const controller = new AbortController();
  const response = await fetch(`${gateway.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${minted.key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'hold', messages: hello, stream: true }),
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  await reader.read();
  return {
    abort: () => controller.abort(),
    rest: async () => {
      let text = '';
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return text;
        text += decoder.decode(value);
      }
    },
  };
}

function inFlight(minted: MintedKey): Promise<number> {
  return store.concurrency.count(`gateway:v1:in-flight:${minted.id}`);
}

beforeAll(async () => {
  redis = createTestStore();
  store = redis.open();
  keyService = await startKeyService(redis.open());
  backend = new ScriptedBackend();
  const env = {
    V1_KEY_RATE_LIMIT: String(RATE_LIMIT),
    V1_KEY_CONCURRENCY_LIMIT: String(CONCURRENCY_LIMIT),
    V1_BAD_KEY_RATE_LIMIT: String(BAD_KEY_LIMIT),
  };
  replicaA = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    completions: backend,
    env,
  });
  replicaB = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    completions: backend,
    env,
  });
});

afterAll(async () => {
  backend?.releaseHeld();
  await Promise.all([replicaA?.close(), replicaB?.close()]);
  await keyService?.close();
  await redis?.cleanup();
});

describe('per-key rate limit', () => {
  it('lets exactly the limit through across two replicas under concurrency, then 429 with retry-after', async () => {
    const minted = await mintKey(replicaA.baseUrl);
    const outcomes = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        sdk(minted.key, i % 2 === 0 ? replicaA : replicaB)
          .models.list()
          .then(
            () => 'ok' as const,
            (error: unknown) => error,
          ),
      ),
    );
    expect(outcomes.filter((outcome) => outcome === 'ok')).toHaveLength(RATE_LIMIT);
    const refusals = outcomes.filter(
      (outcome): outcome is RateLimitError => outcome instanceof RateLimitError,
    );
    expect(refusals).toHaveLength(12 - RATE_LIMIT);
    const refused = refusals[0]!;
    expect(refused.status).toBe(429);
    expect(refused.code).toBe('rate_limit_exceeded');
    expect(Number(refused.headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(refused.headers?.get('retry-after'))).toBeLessThanOrEqual(60);
    expect(refused.headers?.get('x-ratelimit-limit')).toBe(String(RATE_LIMIT));
    expect(refused.headers?.get('x-ratelimit-remaining')).toBe('0');

    await waitFor(
      async () => (await listedKey(replicaA.baseUrl, minted)).limitHits.rate === 12 - RATE_LIMIT || undefined,
      { what: 'every rate refusal to be counted in limitHits.rate' },
    );
  });

  it("does not spend one key's budget on another key", async () => {
    const [first, second] = await Promise.all([mintKey(replicaA.baseUrl), mintKey(replicaA.baseUrl)]);
    for (let i = 0; i < RATE_LIMIT; i += 1) await sdk(first.key, replicaA).models.list();
    await expect(sdk(first.key, replicaB).models.list()).rejects.toBeInstanceOf(RateLimitError);
    await expect(sdk(second.key, replicaB).models.list()).resolves.toBeDefined();
  });
});

describe('a good key behind an address blocked for bad keys', () => {
  function listModels(apiKey: string, address: string, gateway: V1Gateway) {
    return call(gateway.baseUrl, 'GET', '/v1/models', {
      token: apiKey,
      headers: { 'x-forwarded-for': address },
    });
  }

  it('is served, cold and warm on both replicas, and refused only by its own rate, counted in limitHits.rate', async () => {
    const [a, b, c] = randomBytes(3);
    const address = `10.${a}.${b}.${c}`;
    const minted = await mintKey(replicaA.baseUrl);
    const unknownKey = `svc_${'A'.repeat(43)}`;
    for (let i = 0; i < BAD_KEY_LIMIT; i += 1)
      expect((await listModels(unknownKey, address, replicaA)).status).toBe(401);
    const blocked = await listModels(unknownKey, address, replicaB);
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('x-ratelimit-limit')).toBeNull();

    // The key is cold on each replica at its first call there, warm after.
    const answers = [];
    for (let i = 0; i < RATE_LIMIT + 2; i += 1)
      answers.push(await listModels(minted.key, address, i % 2 === 0 ? replicaB : replicaA));
    expect(answers.map((answer) => answer.status)).toEqual([...Array(RATE_LIMIT).fill(200), 429, 429]);
    // The two refusals are the key's own limit (its window's headers), not the address's block...
    for (const refused of answers.slice(RATE_LIMIT))
      expect(refused.headers.get('x-ratelimit-limit')).toBe(String(RATE_LIMIT));
    // ...and are counted in the key's limitHits, like any refusal of the key.
    await waitFor(async () => (await listedKey(replicaA.baseUrl, minted)).limitHits.rate === 2 || undefined, {
      what: "the key's two rate refusals to be counted in limitHits.rate",
    });
    // The address is still blocked for bad keys.
    expect((await listModels(unknownKey, address, replicaA)).status).toBe(429);
  });
});

describe('per-key concurrency limit', () => {
  it('refuses calls past the limit in flight across replicas with 429 concurrency_limit_exceeded, and frees slots after', async () => {
    const minted = await mintKey(replicaA.baseUrl);
    const held = await Promise.all([openHeldStream(minted, replicaA), openHeldStream(minted, replicaB)]);
    expect(await inFlight(minted)).toBe(CONCURRENCY_LIMIT);

    const refused = await sdk(minted.key, replicaB)
      .chat.completions.create({ model: 'echo:1b', messages: hello })
      .catch((caught: unknown) => caught);
    expect(refused).toBeInstanceOf(RateLimitError);
    expect((refused as APIError).code).toBe('concurrency_limit_exceeded');
    expect(Number((refused as APIError).headers?.get('retry-after'))).toBeGreaterThanOrEqual(1);

    backend.releaseHeld();
    const texts = await Promise.all(held.map((stream) => stream.rest()));
    for (const text of texts) expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    await waitFor(async () => (await inFlight(minted)) === 0 || undefined, {
      what: 'both slots to be released',
    });
    await expect(
      sdk(minted.key, replicaA).chat.completions.create({ model: 'echo:1b', messages: hello }),
    ).resolves.toMatchObject({ object: 'chat.completion' });
    await waitFor(
      async () => (await listedKey(replicaA.baseUrl, minted)).limitHits.concurrency === 1 || undefined,
      { what: 'the concurrency refusal to be counted in limitHits.concurrency' },
    );
  });

  it("releases the slot when the client aborts mid-stream, but keeps the submitted job's fee held for its lifecycle to settle", async () => {
    const minted = await mintKey(replicaA.baseUrl, { spendCapWei: String(FEE_WEI) });
    const stream = await openHeldStream(minted, replicaA);
    expect(await inFlight(minted)).toBe(1);
    stream.abort();
    await waitFor(async () => (await inFlight(minted)) === 0 || undefined, {
      what: 'the aborted call to release its slot',
    });
    const aborted = backend.requests.at(-1);
    expect(backend.aborted).toContain(aborted?.callId);

    // The job is on chain and the wallet pays for it: leaving must not hand the fee back to the cap.
    const refused = await call(replicaB.baseUrl, 'POST', '/v1/chat/completions', {
      token: minted.key,
      body: { model: 'echo:1b', messages: hello },
    });
    expect(refused.status).toBe(402);
    expect((refused.body as { error: { code: string } }).error.code).toBe('spend_cap_exceeded');
    expect(backend.requests.at(-1)).toBe(aborted);

    // The job's lifecycle settles the reservation (here: it failed, so the fee comes back).
    const settler = createClient(KeyService, keyService.address, testServiceClientOptions('key-service'));
    try {
      const released = await settler.releaseSpend({
        reservationId: delegatePaymentOf(aborted).reservationId,
      });
      expect(released.state).toBe(SpendReservationState.RELEASED);
    } finally {
      closeClient(settler);
    }
    const answer = await call(replicaB.baseUrl, 'POST', '/v1/chat/completions', {
      token: minted.key,
      body: { model: 'echo:1b', messages: hello },
    });
    expect(answer.status).toBe(200);
  });
});
