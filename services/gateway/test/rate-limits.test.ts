import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call, randomWallet, signInOverHttp } from './support/http.js';
import { startKeyService, type RunningKeyService } from './support/key-service.js';
import { createTestStore, type TestStore } from './support/test-store.js';

const KEY_ROUTES_LIMIT = 3;
const SIGN_IN_LIMIT = 2;

let redis: TestStore;
let signInRedis: TestStore;
let keyService: RunningKeyService;
// Two replicas over one store: the per-wallet limit must hold across them.
let replicaA: RunningGateway;
let replicaB: RunningGateway;
let strictSignIn: RunningGateway;

beforeAll(async () => {
  redis = createTestStore();
  signInRedis = createTestStore();
  keyService = await startKeyService(redis.open());
  const env = { KEY_ROUTES_RATE_LIMIT: String(KEY_ROUTES_LIMIT), SIGN_IN_RATE_LIMIT: '1000' };
  replicaA = await startGateway({ keyServiceAddress: keyService.address, store: redis.open(), env });
  replicaB = await startGateway({ keyServiceAddress: keyService.address, store: redis.open(), env });
  strictSignIn = await startGateway({
    keyServiceAddress: keyService.address,
    store: signInRedis.open(),
    env: { SIGN_IN_RATE_LIMIT: String(SIGN_IN_LIMIT) },
  });
});

afterAll(async () => {
  await Promise.all([replicaA?.close(), replicaB?.close(), strictSignIn?.close()]);
  await keyService?.close();
  await redis?.cleanup();
  await signInRedis?.cleanup();
});

describe('per-wallet limit on the key routes', () => {
  it('lets exactly the limit through across replicas under concurrency, then 429 with retry-after', async () => {
    const { token } = await signInOverHttp(replicaA.baseUrl, randomWallet());
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        call(i % 2 === 0 ? replicaA.baseUrl : replicaB.baseUrl, 'GET', '/api/api-keys', { token }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 200)).toHaveLength(KEY_ROUTES_LIMIT);
    expect(statuses.filter((status) => status === 429)).toHaveLength(10 - KEY_ROUTES_LIMIT);

    const refused = answers.find((answer) => answer.status === 429)!;
    expect(refused.body).toEqual({ error: 'rate_limit_exceeded', message: expect.any(String) });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.headers.get('x-ratelimit-limit')).toBe(String(KEY_ROUTES_LIMIT));
    expect(refused.headers.get('x-ratelimit-remaining')).toBe('0');

    // A refusal of a mint mints nothing.
    const mint = await call(replicaB.baseUrl, 'POST', '/api/api-keys', { token, body: {} });
    expect(mint.status).toBe(429);
  });

  it("does not spend one wallet's budget on another's calls", async () => {
    const [first, second] = await Promise.all([
      signInOverHttp(replicaA.baseUrl, randomWallet()),
      signInOverHttp(replicaA.baseUrl, randomWallet()),
    ]);
    for (let i = 0; i < KEY_ROUTES_LIMIT; i += 1)
      expect((await call(replicaA.baseUrl, 'GET', '/api/api-keys', { token: first.token })).status).toBe(200);
    expect((await call(replicaA.baseUrl, 'GET', '/api/api-keys', { token: first.token })).status).toBe(429);
    expect((await call(replicaB.baseUrl, 'GET', '/api/api-keys', { token: second.token })).status).toBe(200);
  });
});

describe('per-address limit on the sign-in routes', () => {
  it('refuses sign-in calls past the limit with 429 and retry-after', async () => {
    const address = randomWallet().address;
    const answers = await Promise.all(
      Array.from({ length: 5 }, () =>
        call(strictSignIn.baseUrl, 'GET', `/api/auth/challenge?address=${address}`),
      ),
    );
    expect(answers.filter((answer) => answer.status === 200)).toHaveLength(SIGN_IN_LIMIT);
    const refused = answers.filter((answer) => answer.status === 429);
    expect(refused).toHaveLength(5 - SIGN_IN_LIMIT);
    expect(refused[0]!.body).toEqual({ error: 'rate_limit_exceeded', message: expect.any(String) });
    expect(Number(refused[0]!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const verify = await call(strictSignIn.baseUrl, 'POST', '/api/auth/verify', {
      body: { message: 'm', signature: '0x' },
    });
    expect(verify.status).toBe(429);
  });
});
