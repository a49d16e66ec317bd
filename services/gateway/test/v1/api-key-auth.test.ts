import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import OpenAI, { APIError, AuthenticationError } from 'openai';
import { call, randomWallet, signInOverHttp } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { mintKey } from './support/keys.js';
import { REQUIREMENTS } from './support/scripted-settler.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

const BAD_KEY_LIMIT = 3;

let redis: TestStore;
let keyService: RunningKeyService;
let gateway: V1Gateway;

/** A client address of its own per test (the gateway trusts X-Forwarded-For from loopback). */
function freshAddress(): string {
  const [a, b, c] = randomBytes(3);
  return `10.${a}.${b}.${c}`;
}

function sdk(apiKey: string, address = freshAddress()): OpenAI {
  return new OpenAI({
    apiKey,
    baseURL: `${gateway.baseUrl}/v1`,
    maxRetries: 0,
    defaultHeaders: { 'x-forwarded-for': address },
  });
}

function unknownKey(): string {
  return `svc_${'A'.repeat(43)}`;
}

async function listModelsError(client: OpenAI): Promise<APIError> {
  const error = await client.models.list().catch((caught: unknown) => caught);
  if (!(error instanceof APIError)) throw new Error(`expected an APIError, got ${String(error)}`);
  return error;
}

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  gateway = await startV1Gateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { V1_BAD_KEY_RATE_LIMIT: String(BAD_KEY_LIMIT), V1_KEY_RATE_LIMIT: '1000' },
  });
});

afterAll(async () => {
  await gateway?.close();
  await keyService?.close();
  await redis?.cleanup();
});

describe('API key authentication', () => {
  it("answers 401 invalid_api_key in OpenAI's shape for an unknown, malformed or missing key", async () => {
    for (const apiKey of [unknownKey(), 'svc_short', 'sk-not-ours']) {
      const error = await listModelsError(sdk(apiKey));
      expect(error).toBeInstanceOf(AuthenticationError);
      expect(error.status).toBe(401);
      expect(error.code).toBe('invalid_api_key');
      expect(error.type).toBe('invalid_request_error');
    }
    const missing = await call(gateway.baseUrl, 'GET', '/v1/models', {
      headers: { 'x-forwarded-for': freshAddress() },
    });
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({
      error: {
        message: expect.any(String),
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
    });
  });

  it('refuses a sign-in token presented as an API key without asking the key-service', async () => {
    const { token } = await signInOverHttp(gateway.baseUrl, randomWallet());
    const before = gateway.keyServiceCalls.get('resolveKey') ?? 0;
    const error = await listModelsError(sdk(token));
    expect(error.status).toBe(401);
    expect(error.code).toBe('invalid_api_key');
    expect(gateway.keyServiceCalls.get('resolveKey') ?? 0).toBe(before);
  });

  it('serves a warm key from the cache with no gRPC call', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const client = sdk(minted.key);
    await client.models.list();
    const afterFirst = gateway.keyServiceCalls.get('resolveKey') ?? 0;
    await Promise.all([client.models.list(), client.models.list(), client.models.list()]);
    expect(gateway.keyServiceCalls.get('resolveKey') ?? 0).toBe(afterFirst);
  });

  it('resolves concurrent cold calls of one key with one key-service call', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const before = gateway.keyServiceCalls.get('resolveKey') ?? 0;
    const client = sdk(minted.key);
    await Promise.all(Array.from({ length: 8 }, () => client.models.list()));
    expect((gateway.keyServiceCalls.get('resolveKey') ?? 0) - before).toBe(1);
  });

  it('refuses a revoked key from the very next call, though it is warm in the cache', async () => {
    const minted = await mintKey(gateway.baseUrl);
    const client = sdk(minted.key);
    await client.models.list();
    await client.models.list();
    const revoke = await call(gateway.baseUrl, 'POST', `/api/api-keys/${minted.id}/revoke`, {
      token: minted.token,
    });
    expect(revoke.status).toBe(204);
    const resolvesBefore = gateway.keyServiceCalls.get('resolveKey') ?? 0;
    const error = await listModelsError(client);
    expect(error.status).toBe(401);
    expect(error.code).toBe('invalid_api_key');
    // Refused by the store's marker while the key was cached, not by asking the key-service again.
    expect(gateway.keyServiceCalls.get('resolveKey') ?? 0).toBe(resolvesBefore);

    const deleted = await call(gateway.baseUrl, 'DELETE', `/api/api-keys/${minted.id}`, {
      token: minted.token,
    });
    expect(deleted.status).toBe(204);
    expect((await listModelsError(client)).code).toBe('invalid_api_key');
  });

  it('answers 401 to a completion with no key and no payment (no per-call payments here)', async () => {
    const answer = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      headers: { 'x-forwarded-for': freshAddress() },
    });
    expect(answer.status).toBe(401);
    expect(answer.body).toMatchObject({ error: { code: 'invalid_api_key' } });
  });
});

describe('PAYMENT-SIGNATURE on a server without per-call payments', () => {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64');
  it.each([
    [
      'a well-formed x402 v2 payload',
      encode({
        x402Version: 2,
        accepted: REQUIREMENTS,
        payload: {
          signature: `0x${'11'.repeat(65)}`,
          authorization: {
            payer: `0x${'77'.repeat(20)}`,
            payTo: REQUIREMENTS.payTo,
            facilitator: REQUIREMENTS.extra.facilitatorAddress,
            maxAmount: REQUIREMENTS.amount,
            deadline: '4102444800',
            nonce: `0x${'22'.repeat(32)}`,
          },
        },
      }),
      'unsupported_scheme',
    ],
    ['a payload that is not base64 JSON', '%%%not-base64%%%', 'invalid_payload'],
    ['a malformed x402 v2 payload', encode({ x402Version: 2, accepted: {}, payload: {} }), 'invalid_payload'],
    ['another x402 version', encode({ x402Version: 1 }), 'invalid_x402_version'],
    ['JSON that is no payment ({"hello":1})', encode({ hello: 1 }), 'invalid_payload'],
    ['a payload whose x402Version is not a number', encode({ x402Version: '2' }), 'invalid_payload'],
  ])('answers 400 for %s', async (_name, header, code) => {
    const answer = await call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
      body: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
      headers: { 'payment-signature': header, 'x-forwarded-for': freshAddress() },
    });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ error: { code, type: 'invalid_request_error' } });
  });
});

describe('bad keys per client address', () => {
  it('refuses bad keys from an address past the limit with 429 and retry-after, but still serves its good key', async () => {
    const address = freshAddress();
    const good = await mintKey(gateway.baseUrl);
    for (let i = 0; i < BAD_KEY_LIMIT; i += 1)
      expect((await listModelsError(sdk(unknownKey(), address))).status).toBe(401);

    const refused = await listModelsError(sdk(unknownKey(), address));
    expect(refused.status).toBe(429);
    expect(refused.code).toBe('rate_limit_exceeded');
    const retryAfter = Number(refused.headers?.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect((await listModelsError(sdk('sk-not-ours', address))).status).toBe(429);

    // The key is resolved before the limit is consulted: one client's guesses (or a shared proxy's
    // address) do not lock out the good keys behind that address.
    await expect(sdk(good.key, address).models.list()).resolves.toBeDefined();
  });

  it('counts calls with a revoked key like unknown keys, from the call that finds its marker on', async () => {
    const address = freshAddress();
    const minted = await mintKey(gateway.baseUrl);
    const client = sdk(minted.key, address);
    await client.models.list();
    const revoke = await call(gateway.baseUrl, 'POST', `/api/api-keys/${minted.id}/revoke`, {
      token: minted.token,
    });
    expect(revoke.status).toBe(204);
    // The first call still finds the key cached and reads its marker; the next ones ask the key-service.
    for (let i = 0; i < BAD_KEY_LIMIT; i += 1) expect((await listModelsError(client)).status).toBe(401);
    const refused = await listModelsError(client);
    expect(refused.status).toBe(429);
    expect(refused.code).toBe('rate_limit_exceeded');
    expect((await listModelsError(sdk(unknownKey(), address))).status).toBe(429);
  });

  it('does not count calls that carry no credential (any web page can send those cross-origin)', async () => {
    const address = freshAddress();
    const good = await mintKey(gateway.baseUrl);
    for (let i = 0; i < BAD_KEY_LIMIT * 10 + 1; i += 1) {
      const answer = await call(gateway.baseUrl, 'GET', '/v1/models', {
        headers: { 'x-forwarded-for': address },
      });
      expect(answer.status).toBe(401);
    }
    await expect(sdk(good.key, address).models.list()).resolves.toBeDefined();
    // The window is still empty for this address: a bad key gets the plain 401.
    expect((await listModelsError(sdk(unknownKey(), address))).status).toBe(401);
  });

  it('counts IPv6 clients by their /64', async () => {
    const [a = 0, b = 0] = randomBytes(2);
    const network = `2001:db8:${a.toString(16)}:${b.toString(16)}`;
    for (let i = 0; i < BAD_KEY_LIMIT; i += 1)
      expect((await listModelsError(sdk(unknownKey(), `${network}::${i + 1}`))).status).toBe(401);
    // Another address of the same /64 is the same client.
    expect((await listModelsError(sdk(unknownKey(), `${network}:ffff:1:2:3`))).status).toBe(429);
    // The neighbouring /64 is another.
    expect(
      (await listModelsError(sdk(unknownKey(), `2001:db8:${a.toString(16)}:${(b + 256).toString(16)}::1`)))
        .status,
    ).toBe(401);
  });

  it('counts bad keys from concurrent calls exactly', async () => {
    const address = freshAddress();
    const errors = await Promise.all(
      Array.from({ length: 10 }, () => listModelsError(sdk(unknownKey(), address))),
    );
    const statuses = errors.map((error) => error.status);
    expect(statuses.filter((status) => status === 401)).toHaveLength(BAD_KEY_LIMIT);
    expect(statuses.filter((status) => status === 429)).toHaveLength(10 - BAD_KEY_LIMIT);
  });
});

describe('unknown /v1 routes', () => {
  it("answers 404 in OpenAI's shape", async () => {
    const answer = await call(gateway.baseUrl, 'GET', '/v1/embeddings');
    expect(answer.status).toBe(404);
    expect(answer.body).toMatchObject({ error: { type: 'invalid_request_error', code: null } });
  });
});
