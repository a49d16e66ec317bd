import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { generateServiceTokenKeyPair } from '@svc/platform';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call, randomWallet } from './support/http.js';
import { startKeyService, type RunningKeyService } from './support/key-service.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// The gateway's calls to the key-service carry its service token: signed with the gateway's key of the
// deployment they are served; a gateway holding another key is refused by the key-service on every call,
// so it never turns ready and its /api answers 500 rather than acting.

let redis: TestStore;
let keyService: RunningKeyService;
let trusted: RunningGateway;
let stranger: RunningGateway;

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  trusted = await startGateway({ keyServiceAddress: keyService.address, store: redis.open() });
  stranger = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { SERVICE_TOKEN_PRIVATE_KEY: generateServiceTokenKeyPair().privateKey },
  });
});

afterAll(async () => {
  await stranger?.close();
  await trusted?.close();
  await keyService?.close();
  await redis?.cleanup();
});

describe('service tokens between the gateway and the key-service', () => {
  it('let the gateway of the deployment through', async () => {
    expect((await call(trusted.baseUrl, 'GET', '/readyz')).status).toBe(200);
    const challenge = await call(
      trusted.baseUrl,
      'GET',
      `/api/auth/challenge?address=${randomWallet().address}`,
    );
    expect(challenge.status).toBe(200);
  });

  it('refuse a gateway signing with another key: not ready, and its calls fail without acting', async () => {
    expect((await call(stranger.baseUrl, 'GET', '/readyz')).status).toBe(503);
    const challenge = await call(
      stranger.baseUrl,
      'GET',
      `/api/auth/challenge?address=${randomWallet().address}`,
    );
    expect(challenge.status).toBe(500);
    expect(challenge.body).toMatchObject({ error: 'internal_error' });
  });
});
