import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call, randomWallet, signInOverHttp, type HttpAnswer } from './support/http.js';
import { startKeyService, type RunningKeyService } from './support/key-service.js';
import { createTestStore, type TestStore } from './support/test-store.js';

const BAD_TOKEN_LIMIT = 3;

let redis: TestStore;
let keyService: RunningKeyService;
// Two replicas over one store: the per-address limit must hold across them.
let replicaA: RunningGateway;
let replicaB: RunningGateway;
/** A valid sign-in token, and an API key of its wallet. */
let token: string;
let apiKey: string;

/** A client address of its own per test (the gateway trusts X-Forwarded-For from loopback). */
function freshAddress(): string {
  const [a, b, c] = randomBytes(3);
  return `10.${a}.${b}.${c}`;
}

/** The token with its signature changed: a JWT of the right shape that the key-service refuses. */
function forged(valid: string): string {
  const last = valid.at(-2) === 'A' ? 'B' : 'A';
  return `${valid.slice(0, -2)}${last}${valid.at(-1)}`;
}

function listKeys(
  address: string,
  authorization: string | undefined,
  base = replicaA.baseUrl,
): Promise<HttpAnswer> {
  const headers: Record<string, string> = { 'x-forwarded-for': address };
  if (authorization !== undefined) headers.authorization = authorization;
  return call(base, 'GET', '/api/api-keys', { headers });
}

function expectRateLimited(answer: HttpAnswer): void {
  expect(answer.status).toBe(429);
  expect(answer.body).toEqual({ error: 'rate_limit_exceeded', message: expect.any(String) });
  const retryAfter = Number(answer.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

const unauthorized = { error: 'unauthorized', message: expect.any(String) };

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  const env = {
    API_BAD_TOKEN_RATE_LIMIT: String(BAD_TOKEN_LIMIT),
    KEY_ROUTES_RATE_LIMIT: '1000',
    SIGN_IN_RATE_LIMIT: '1000',
  };
  replicaA = await startGateway({ keyServiceAddress: keyService.address, store: redis.open(), env });
  replicaB = await startGateway({ keyServiceAddress: keyService.address, store: redis.open(), env });
  ({ token } = await signInOverHttp(replicaA.baseUrl, randomWallet()));
  const minted = await call(replicaA.baseUrl, 'POST', '/api/api-keys', { token, body: {} });
  apiKey = (minted.body as { key: string }).key;
});

afterAll(async () => {
  await Promise.all([replicaA?.close(), replicaB?.close()]);
  await keyService?.close();
  await redis?.cleanup();
});

describe('invalid sign-in tokens per client address on /api/api-keys', () => {
  it('answers 429 with retry-after past the limit, and still serves a valid token from the address', async () => {
    const address = freshAddress();
    for (let i = 0; i < BAD_TOKEN_LIMIT; i += 1) {
      const answer = await listKeys(address, `Bearer ${forged(token)}`);
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual(unauthorized);
    }
    expectRateLimited(await listKeys(address, `Bearer ${forged(token)}`));
    // On every replica, and for every route.
    expectRateLimited(await listKeys(address, `Bearer ${forged(token)}`, replicaB.baseUrl));
    const mint = await call(replicaB.baseUrl, 'POST', '/api/api-keys', {
      headers: { 'x-forwarded-for': address, authorization: `Bearer ${forged(token)}` },
      body: {},
    });
    expectRateLimited(mint);

    // The token is checked before the limit is consulted: one client's guesses (or a shared proxy's
    // address) do not lock out the wallets signing in behind that address.
    const listed = await listKeys(address, `Bearer ${token}`);
    expect(listed.status).toBe(200);
    expect(listed.body).toHaveLength(1);
    const minted = await call(replicaB.baseUrl, 'POST', '/api/api-keys', {
      headers: { 'x-forwarded-for': address, authorization: `Bearer ${token}` },
      body: {},
    });
    expect(minted.status).toBe(201);
    // Another address is not held to this one's failures.
    expect((await listKeys(freshAddress(), `Bearer ${forged(token)}`)).status).toBe(401);
  });

  it('counts every presented credential that fails: a forged token, an API key, garbage, another scheme', async () => {
    const kinds = [`Bearer ${forged(token)}`, `Bearer ${apiKey}`, 'Bearer not-a-token', 'Basic dXNlcjpwYXNz'];
    // Each kind alone fills a window of its own address.
    for (const authorization of kinds) {
      const address = freshAddress();
      for (let i = 0; i < BAD_TOKEN_LIMIT; i += 1)
        expect((await listKeys(address, authorization)).status).toBe(401);
      expectRateLimited(await listKeys(address, authorization));
    }
  });

  it('does not count requests that send no Authorization (any web page can send those cross-origin)', async () => {
    const address = freshAddress();
    for (let i = 0; i < BAD_TOKEN_LIMIT * 10 + 1; i += 1) {
      const answer = await listKeys(address, undefined);
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual(unauthorized);
    }
    // The window is still empty for this address: a failing token gets the plain 401.
    expect((await listKeys(address, `Bearer ${forged(token)}`)).status).toBe(401);
  });

  it('counts IPv6 clients by their /64', async () => {
    const [a = 0, b = 0] = randomBytes(2);
    const network = `2001:db8:${a.toString(16)}:${b.toString(16)}`;
    for (let i = 0; i < BAD_TOKEN_LIMIT; i += 1)
      expect((await listKeys(`${network}::${i + 1}`, `Bearer ${forged(token)}`)).status).toBe(401);
    // Another address of the same /64 is the same client.
    expectRateLimited(await listKeys(`${network}:ffff:1:2:3`, `Bearer ${forged(token)}`));
    // The neighbouring /64 is another.
    const neighbour = `2001:db8:${a.toString(16)}:${(b + 256).toString(16)}::1`;
    expect((await listKeys(neighbour, `Bearer ${forged(token)}`)).status).toBe(401);
  });

  it('lets exactly the limit of failing tokens through across replicas at once, serving valid ones meanwhile', async () => {
    const address = freshAddress();
    const failing = 24;
    const valid = 12;
    const requests = Array.from({ length: failing + valid }, (_, i) => {
      const base = i % 2 === 0 ? replicaA.baseUrl : replicaB.baseUrl;
      // Interleaved, so valid tokens arrive while the address is being blocked and after it is.
      const isValid = i % 3 === 0;
      return { isValid, answer: listKeys(address, `Bearer ${isValid ? token : forged(token)}`, base) };
    });
    const answers = await Promise.all(
      requests.map(async ({ isValid, answer }) => ({ isValid, status: (await answer).status })),
    );
    const failed = answers.filter((answer) => !answer.isValid).map((answer) => answer.status);
    const served = answers.filter((answer) => answer.isValid).map((answer) => answer.status);
    expect(failed).toHaveLength(failing);
    expect(failed.filter((status) => status === 401)).toHaveLength(BAD_TOKEN_LIMIT);
    expect(failed.filter((status) => status === 429)).toHaveLength(failing - BAD_TOKEN_LIMIT);
    expect(served).toEqual(Array(valid).fill(200));
  });
});
