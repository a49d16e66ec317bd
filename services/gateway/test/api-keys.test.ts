import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call, randomWallet, signInOverHttp } from './support/http.js';
import { startKeyService, type RunningKeyService } from './support/key-service.js';
import { createTestStore, type TestStore } from './support/test-store.js';

let redis: TestStore;
let keyService: RunningKeyService;
let gateway: RunningGateway;
let base: string;

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  gateway = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { KEY_ROUTES_RATE_LIMIT: '1000', SIGN_IN_RATE_LIMIT: '1000' },
  });
  base = gateway.baseUrl;
});

afterAll(async () => {
  await gateway?.close();
  await keyService?.close();
  await redis?.cleanup();
});

interface ListedKey {
  id: string;
  prefix: string;
  name: string;
  spendCapWei: string | null;
  spentWei: string;
  limitHits: { rate: number; concurrency: number; spendCap: number; sessionOpens: number };
  createdAt: string;
  revokedAt: string | null;
}

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

async function signedIn(): Promise<string> {
  return (await signInOverHttp(base, randomWallet())).token;
}

async function mint(token: string, body: unknown = {}): Promise<ListedKey & { key: string }> {
  const minted = await call(base, 'POST', '/api/api-keys', { token, body });
  expect(minted.status).toBe(201);
  return minted.body as ListedKey & { key: string };
}

describe('the key lifecycle over HTTP', () => {
  it('signs in, mints, lists, patches, revokes and deletes a key', async () => {
    const wallet = randomWallet();
    const challenge = await call(base, 'GET', `/api/auth/challenge?address=${wallet.address}`);
    expect(challenge.status).toBe(200);
    const { nonce, message } = challenge.body as { nonce: string; message: string };
    expect(message).toContain(wallet.address);
    expect(message).toContain(`Nonce: ${nonce}`);

    const signature = await wallet.signMessage(message);
    const verified = await call(base, 'POST', '/api/auth/verify', { body: { message, signature } });
    expect(verified.status).toBe(200);
    const signIn = verified.body as { token: string; expiresAt: string; address: string };
    expect(signIn.address).toBe(wallet.address);
    expect(signIn.expiresAt).toMatch(ISO_TIME);
    const lifetimeMs = Date.parse(signIn.expiresAt) - Date.now();
    expect(lifetimeMs).toBeGreaterThan(59 * 60_000);
    expect(lifetimeMs).toBeLessThanOrEqual(60 * 60_000);
    expect(verified.headers.get('cache-control')).toBe('no-store');
    const token = signIn.token;

    const minted = await call(base, 'POST', '/api/api-keys', {
      token,
      body: { name: 'ci', spendCapWei: '1000000000000000000', ignored: true },
    });
    expect(minted.status).toBe(201);
    const created = minted.body as ListedKey & { key: string };
    expect(created.key).toMatch(/^svc_[0-9A-Za-z]+$/);
    expect(created).toEqual({
      id: expect.any(String),
      prefix: created.key.slice(0, 11),
      name: 'ci',
      spendCapWei: '1000000000000000000',
      spentWei: '0',
      limitHits: { rate: 0, concurrency: 0, spendCap: 0, sessionOpens: 0 },
      createdAt: expect.stringMatching(ISO_TIME),
      revokedAt: null,
      key: created.key,
    });
    const second = await mint(token);
    expect(second.name).toBe('');
    expect(second.spendCapWei).toBeNull();

    const listed = await call(base, 'GET', '/api/api-keys', { token });
    expect(listed.status).toBe(200);
    const { key: _fullKey, ...asListed } = created;
    // Newest first; the full key is never part of a listing.
    expect(listed.body).toEqual([expect.objectContaining({ id: second.id }), asListed]);
    expect(listed.text).not.toContain(created.key);

    const patched = await call(base, 'PATCH', `/api/api-keys/${created.id}`, {
      token,
      body: { spendCapWei: '5', name: 'not changed by PATCH' },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toEqual({ ...asListed, spendCapWei: '5' });
    const uncapped = await call(base, 'PATCH', `/api/api-keys/${created.id}`, {
      token,
      body: { spendCapWei: null },
    });
    expect(uncapped.status).toBe(200);
    expect((uncapped.body as ListedKey).spendCapWei).toBeNull();

    const activeDelete = await call(base, 'DELETE', `/api/api-keys/${created.id}`, { token });
    expect(activeDelete.status).toBe(409);
    expect(activeDelete.body).toEqual({ error: 'api_key_active', message: expect.any(String) });

    const revoked = await call(base, 'POST', `/api/api-keys/${created.id}/revoke`, { token });
    expect(revoked.status).toBe(204);
    expect(revoked.text).toBe('');
    const afterRevoke = (await call(base, 'GET', '/api/api-keys', { token })).body as ListedKey[];
    const revokedKey = afterRevoke.find((key) => key.id === created.id);
    expect(revokedKey?.revokedAt).toMatch(ISO_TIME);
    expect(revokedKey?.prefix).toBe(created.prefix);

    const revokedPatch = await call(base, 'PATCH', `/api/api-keys/${created.id}`, {
      token,
      body: { spendCapWei: '7' },
    });
    expect(revokedPatch.status).toBe(409);
    expect(revokedPatch.body).toEqual({ error: 'api_key_revoked', message: expect.any(String) });
    const unchanged = (await call(base, 'GET', '/api/api-keys', { token })).body as ListedKey[];
    expect(unchanged.find((key) => key.id === created.id)?.spendCapWei).toBeNull();

    const deleted = await call(base, 'DELETE', `/api/api-keys/${created.id}`, { token });
    expect(deleted.status).toBe(204);
    const afterDelete = (await call(base, 'GET', '/api/api-keys', { token })).body as ListedKey[];
    expect(afterDelete.map((key) => key.id)).toEqual([second.id]);
    const deletedAgain = await call(base, 'DELETE', `/api/api-keys/${created.id}`, { token });
    expect(deletedAgain.status).toBe(404);
    expect((deletedAgain.body as { error: string }).error).toBe('api_key_not_found');
  });
});

describe('request validation', () => {
  let token: string;
  let keyId: string;
  beforeAll(async () => {
    token = await signedIn();
    keyId = (await mint(token)).id;
  });

  const invalid = { error: 'invalid_request', message: expect.any(String) };

  it.each([
    ['a name over 64 characters', { name: 'n'.repeat(65) }, /name/],
    ['a name that is not a string', { name: 42 }, /name must be a string/],
    ['a cap that is a number', { spendCapWei: 1000 }, /spendCapWei/],
    ['a negative cap', { spendCapWei: '-1' }, /spendCapWei/],
    ['a fractional cap', { spendCapWei: '1.5' }, /spendCapWei/],
    ['a cap in hex', { spendCapWei: '0x10' }, /spendCapWei/],
    ['a cap above uint256', { spendCapWei: (2n ** 256n).toString() }, /spendCapWei/],
  ])('refuses a mint with %s', async (_case, body, message) => {
    const answer = await call(base, 'POST', '/api/api-keys', { token, body });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual(invalid);
    expect((answer.body as { message: string }).message).toMatch(message);
  });

  it('accepts a name of exactly 64 characters', async () => {
    const minted = await mint(token, { name: 'n'.repeat(64) });
    expect(minted.name).toHaveLength(64);
  });

  it.each([
    ['no spendCapWei at all', { name: 'x' }],
    ['a cap that is a number', { spendCapWei: 5 }],
    ['a cap that is not decimal', { spendCapWei: 'ten' }],
  ])('refuses a PATCH with %s', async (_case, body) => {
    const answer = await call(base, 'PATCH', `/api/api-keys/${keyId}`, { token, body });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual(invalid);
    expect((answer.body as { message: string }).message).toMatch(/spendCapWei/);
  });

  it('refuses a PATCH with no body', async () => {
    const answer = await call(base, 'PATCH', `/api/api-keys/${keyId}`, { token });
    expect(answer.status).toBe(400);
    expect((answer.body as { message: string }).message).toMatch(/spendCapWei is required/);
  });

  it.each([
    ['truncated JSON', '{"name": "x"', 'application/json'],
    ['plain text', 'name=x', 'text/plain'],
    ['no content type', '{not json', ''],
  ])('answers a body of %s with invalid_request in JSON', async (_case, rawBody, contentType) => {
    const answer = await call(base, 'POST', '/api/api-keys', {
      token,
      rawBody,
      headers: contentType ? { 'content-type': contentType } : {},
    });
    expect(answer.status).toBe(400);
    expect(answer.headers.get('content-type')).toMatch(/^application\/json/);
    expect(answer.body).toEqual({ error: 'invalid_request', message: 'The body is not valid JSON.' });
  });

  it('refuses a JSON body that is not an object', async () => {
    const answer = await call(base, 'POST', '/api/api-keys', { token, body: ['name'] });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: 'invalid_request', message: 'The body must be a JSON object.' });
  });

  it('refuses a body over the size limit', async () => {
    const answer = await call(base, 'POST', '/api/api-keys', {
      token,
      body: { name: 'x', padding: 'p'.repeat(64 * 1024) },
    });
    expect(answer.status).toBe(400);
    expect((answer.body as { error: string }).error).toBe('invalid_request');
  });

  it('answers 404 api_key_not_found for unknown ids on every key route', async () => {
    for (const id of ['00000000-0000-0000-0000-000000000000', 'not-an-id']) {
      const answers = await Promise.all([
        call(base, 'PATCH', `/api/api-keys/${id}`, { token, body: { spendCapWei: '1' } }),
        call(base, 'POST', `/api/api-keys/${id}/revoke`, { token }),
        call(base, 'DELETE', `/api/api-keys/${id}`, { token }),
      ]);
      for (const answer of answers) {
        expect(answer.status).toBe(404);
        expect(answer.body).toEqual({ error: 'api_key_not_found', message: expect.any(String) });
      }
    }
  });

  it('answers unknown /api routes with 404 in JSON', async () => {
    for (const [method, path] of [
      ['GET', '/api/nothing-here'],
      ['PUT', '/api/api-keys'],
      ['GET', '/api/auth/verify'],
    ] as const) {
      const answer = await call(base, method, path, { token });
      expect(answer.status).toBe(404);
      expect(answer.body).toEqual({ error: 'not_found', message: expect.stringContaining(path) });
    }
  });
});

describe('wallet isolation', () => {
  it("never lets a second wallet see or touch the first wallet's keys", async () => {
    const owner = await signedIn();
    const stranger = await signedIn();
    const active = await mint(owner, { name: 'owned', spendCapWei: '10' });
    const revoked = await mint(owner, { name: 'owned, revoked' });
    expect((await call(base, 'POST', `/api/api-keys/${revoked.id}/revoke`, { token: owner })).status).toBe(
      204,
    );

    const strangersList = await call(base, 'GET', '/api/api-keys', { token: stranger });
    expect(strangersList.status).toBe(200);
    expect(strangersList.body).toEqual([]);

    for (const key of [active, revoked]) {
      const answers = await Promise.all([
        call(base, 'PATCH', `/api/api-keys/${key.id}`, { token: stranger, body: { spendCapWei: null } }),
        call(base, 'POST', `/api/api-keys/${key.id}/revoke`, { token: stranger }),
        call(base, 'DELETE', `/api/api-keys/${key.id}`, { token: stranger }),
      ]);
      for (const answer of answers) {
        expect(answer.status).toBe(404);
        expect((answer.body as { error: string }).error).toBe('api_key_not_found');
      }
    }
    const ownersList = (await call(base, 'GET', '/api/api-keys', { token: owner })).body as ListedKey[];
    expect(ownersList.map((key) => [key.id, key.spendCapWei, key.revokedAt === null])).toEqual([
      [revoked.id, null, false],
      [active.id, '10', true],
    ]);
  });
});

describe('the 25 active keys limit', () => {
  it('mints exactly 25 keys out of 32 parallel requests, then 409 api_key_limit', async () => {
    const token = await signedIn();
    const answers = await Promise.all(
      Array.from({ length: 32 }, (_, i) =>
        call(base, 'POST', '/api/api-keys', { token, body: { name: `parallel-${i}` } }),
      ),
    );
    const statuses = answers.map((answer) => answer.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(25);
    expect(statuses.filter((status) => status === 409)).toHaveLength(7);
    for (const answer of answers.filter((a) => a.status === 409))
      expect((answer.body as { error: string }).error).toBe('api_key_limit');

    const listed = (await call(base, 'GET', '/api/api-keys', { token })).body as ListedKey[];
    expect(listed).toHaveLength(25);

    // A revoked key no longer counts: one more fits, and only one.
    expect((await call(base, 'POST', `/api/api-keys/${listed[0]!.id}/revoke`, { token })).status).toBe(204);
    const afterRevoke = await Promise.all(
      Array.from({ length: 3 }, () => call(base, 'POST', '/api/api-keys', { token, body: {} })),
    );
    expect(afterRevoke.map((answer) => answer.status).sort()).toEqual([201, 409, 409]);
  });
});
