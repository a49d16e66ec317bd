import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { paymentSignatureFor } from '@svc/x402';
import { call, randomWallet, type HttpAnswer } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { ScriptedBackend } from './support/scripted-backend.js';
import { REQUIREMENTS, ScriptedSettler } from './support/scripted-settler.js';
import { startV1Gateway, type V1Gateway } from './support/v1-gateway.js';

// Calls with no API key cost the payment-settler chain reads (the requirements of a 402, a verification):
// each client address may send only so many per window, counted before the settler is asked anything
// (docs/api.md, Limits: keyless calls per client address), across replicas.

const KEYLESS_LIMIT = 5;

let redis: TestStore;
let keyService: RunningKeyService;
let settler: ScriptedSettler;
let replicas: V1Gateway[];

function keyless(
  gateway: V1Gateway,
  address: string,
  headers: Record<string, string> = {},
): Promise<HttpAnswer> {
  return call(gateway.baseUrl, 'POST', '/v1/chat/completions', {
    body: { model: 'echo:1b', messages: [{ role: 'user', content: 'hello' }] },
    headers: { 'x-forwarded-for': address, ...headers },
  });
}

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  settler = new ScriptedSettler();
  const backend = new ScriptedBackend();
  replicas = await Promise.all(
    [0, 1].map(() =>
      startV1Gateway({
        keyServiceAddress: keyService.address,
        store: redis.open(),
        completions: backend,
        settler,
        env: { V1_KEYLESS_RATE_LIMIT: String(KEYLESS_LIMIT), V1_KEYLESS_RATE_WINDOW: '1m' },
      }),
    ),
  );
});

afterAll(async () => {
  await Promise.all((replicas ?? []).map((replica) => replica.close()));
  await keyService?.close();
  await redis?.cleanup();
});

describe('keyless calls per client address', () => {
  it('answers 429 rate_limit_exceeded with retry-after past the limit, over all replicas, before the settler is asked', async () => {
    const address = '198.51.100.7';
    const answers = await Promise.all(
      Array.from({ length: 3 * KEYLESS_LIMIT }, (_, i) => keyless(replicas[i % 2]!, address)),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 402)).toHaveLength(KEYLESS_LIMIT);
    expect(statuses.filter((status) => status === 429)).toHaveLength(2 * KEYLESS_LIMIT);
    const refused = answers.find((answer) => answer.status === 429)!;
    expect((refused.body as { error: { code: string } }).error.code).toBe('rate_limit_exceeded');
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get('x-ratelimit-limit')).toBe(String(KEYLESS_LIMIT));
    // Only the calls let through cost the settler (and so the chain) anything.
    expect(settler.requirementUrls).toHaveLength(KEYLESS_LIMIT);

    // A payment from the same address is refused before it is verified, too.
    const verifiedBefore = settler.verified.length;
    const paid = await keyless(replicas[0]!, address, {
      'payment-signature': await paymentSignatureFor(randomWallet(), REQUIREMENTS),
    });
    expect(paid.status).toBe(429);
    expect(settler.verified).toHaveLength(verifiedBefore);
  });

  it('counts each address apart', async () => {
    const other = await keyless(replicas[1]!, '198.51.100.8');
    expect(other.status).toBe(402);
  });
});
