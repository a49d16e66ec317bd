import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger } from '@svc/platform';
import { AbiCoder, concat } from 'ethers';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call, randomWallet, signInOverHttp } from './support/http.js';
import { startKeyService, type RunningKeyService } from './support/key-service.js';
import { createTestStore, type TestStore } from './support/test-store.js';

let redis: TestStore;
let keyService: RunningKeyService;
let gateway: RunningGateway;
let base: string;
const logLines: string[] = [];
// The key-service's clock; moved back to sign in "two hours ago" and get a token that is already expired.
let clockOffsetMs = 0;

beforeAll(async () => {
  redis = createTestStore();
  keyService = await startKeyService(redis.open(), { now: () => new Date(Date.now() + clockOffsetMs) });
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logLines.push(chunk.toString('utf8'));
      done();
    },
  });
  gateway = await startGateway({
    keyServiceAddress: keyService.address,
    store: redis.open(),
    env: { KEY_ROUTES_RATE_LIMIT: '1000', SIGN_IN_RATE_LIMIT: '1000' },
    logger: createLogger({ service: 'gateway-test', level: 'info', destination }),
  });
  base = gateway.baseUrl;
});

afterAll(async () => {
  await gateway?.close();
  await keyService?.close();
  await redis?.cleanup();
});

/** The address with the case of its first letter flipped: a typo EIP-55 catches. */
function badChecksum(address: string): string {
  const at = address.slice(2).search(/[a-fA-F]/) + 2;
  const letter = address[at]!;
  const flipped = letter === letter.toUpperCase() ? letter.toLowerCase() : letter.toUpperCase();
  return address.slice(0, at) + flipped + address.slice(at + 1);
}

const unauthorized = { error: 'unauthorized', message: expect.any(String) };

describe('GET /api/auth/challenge', () => {
  it.each([
    ['no address', ''],
    ['an empty address', '?address='],
    ['a short address', '?address=0x1234'],
    ['an address with a bad checksum', `?address=${badChecksum(randomWallet().address)}`],
    ['two addresses', `?address=${'0x' + '1'.repeat(40)}&address=${'0x' + '2'.repeat(40)}`],
  ])('answers 400 invalid_request naming the address for %s', async (_case, query) => {
    const answer = await call(base, 'GET', `/api/auth/challenge${query}`);
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(/address/) });
  });

  it('gives a fresh nonce on every call', async () => {
    const address = randomWallet().address;
    const [first, second] = await Promise.all([
      call(base, 'GET', `/api/auth/challenge?address=${address}`),
      call(base, 'GET', `/api/auth/challenge?address=${address.toLowerCase()}`),
    ]);
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect((first.body as { nonce: string }).nonce).not.toBe((second.body as { nonce: string }).nonce);
  });
});

describe('POST /api/auth/verify', () => {
  async function challengeFor(address: string): Promise<string> {
    const answer = await call(base, 'GET', `/api/auth/challenge?address=${address}`);
    return (answer.body as { message: string }).message;
  }

  it.each([
    ['no body', undefined, /message is required/],
    ['no signature', { message: 'x' }, /signature is required/],
    ['a signature that is not a string', { message: 'x', signature: 7 }, /signature must be a string/],
  ])('answers 400 invalid_request for %s', async (_case, body, message) => {
    const answer = await call(base, 'POST', '/api/auth/verify', { body });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(message) });
  });

  it('answers 400 invalid_request for a signature that is not 65 bytes of hex', async () => {
    const message = await challengeFor(randomWallet().address);
    const answer = await call(base, 'POST', '/api/auth/verify', { body: { message, signature: '0xzz' } });
    expect(answer.status).toBe(400);
    expect(answer.body).toEqual({ error: 'invalid_request', message: expect.stringMatching(/signature/) });
  });

  it("answers 401 unauthorized for another wallet's signature", async () => {
    const wallet = randomWallet();
    const message = await challengeFor(wallet.address);
    const signature = await randomWallet().signMessage(message);
    const answer = await call(base, 'POST', '/api/auth/verify', { body: { message, signature } });
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(unauthorized);
  });

  it('answers 401 unauthorized, naming contract wallets, for an EIP-6492 signature', async () => {
    const owner = randomWallet();
    const message = await challengeFor(randomWallet().address); // a counterfactual account's address
    const wrapped = AbiCoder.defaultAbiCoder().encode(
      ['address', 'bytes', 'bytes'],
      [randomWallet().address, '0x5fbfb9cf', await owner.signMessage(message)],
    );
    const signature = concat([wrapped, `0x${'6492'.repeat(16)}`]);
    const answer = await call(base, 'POST', '/api/auth/verify', { body: { message, signature } });
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual({
      error: 'unauthorized',
      message: expect.stringMatching(
        /smart-contract wallets \(EIP-1271\/EIP-6492\) cannot sign in yet.*externally owned account/,
      ),
    });
  });

  it('answers 401 unauthorized for a signed variant of the issued message, which stays usable', async () => {
    const wallet = randomWallet();
    const message = await challengeFor(wallet.address);
    const variant = `${message}\nResources:\n- https://keys.example.test/admin`;
    const refused = await call(base, 'POST', '/api/auth/verify', {
      body: { message: variant, signature: await wallet.signMessage(variant) },
    });
    expect(refused.status).toBe(401);
    expect(refused.body).toEqual({
      error: 'unauthorized',
      message: expect.stringMatching(/not the message issued with its nonce/),
    });
    const answer = await call(base, 'POST', '/api/auth/verify', {
      body: { message, signature: await wallet.signMessage(message) },
    });
    expect(answer.status).toBe(200);
  });

  it('answers 401 unauthorized when a nonce is used twice', async () => {
    const wallet = randomWallet();
    const message = await challengeFor(wallet.address);
    const signature = await wallet.signMessage(message);
    const answers = await Promise.all(
      Array.from({ length: 4 }, () =>
        call(base, 'POST', '/api/auth/verify', { body: { message, signature } }),
      ),
    );
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 401, 401, 401]);
  });
});

describe('sign-in tokens on the key routes', () => {
  it('answers 401 unauthorized with no Authorization header on every key route', async () => {
    const answers = await Promise.all([
      call(base, 'GET', '/api/api-keys'),
      call(base, 'POST', '/api/api-keys', { body: {} }),
      call(base, 'PATCH', '/api/api-keys/some-id', { body: { spendCapWei: null } }),
      call(base, 'POST', '/api/api-keys/some-id/revoke'),
      call(base, 'DELETE', '/api/api-keys/some-id'),
    ]);
    for (const answer of answers) {
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual(unauthorized);
    }
  });

  it.each([
    ['a garbage token', { authorization: 'Bearer not-a-token' }],
    ['a token without the Bearer scheme', { authorization: 'eyJhbGciOiJFUzI1NiJ9.e30.sig' }],
    ['Basic credentials', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['a forged JWT', { authorization: 'Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiIweDEifQ.' }],
    ['an overlong token', { authorization: `Bearer ${'a'.repeat(10_000)}` }],
  ])('answers 401 unauthorized for %s', async (_case, headers) => {
    const answer = await call(base, 'GET', '/api/api-keys', { headers });
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(unauthorized);
  });

  it('never accepts an API key as a sign-in token', async () => {
    const { token } = await signInOverHttp(base, randomWallet());
    const minted = await call(base, 'POST', '/api/api-keys', { token, body: {} });
    const apiKey = (minted.body as { key: string }).key;
    for (const path of ['/api/api-keys']) {
      const answer = await call(base, 'GET', path, { token: apiKey });
      expect(answer.status).toBe(401);
      expect(answer.body).toEqual(unauthorized);
    }
    const mintWithKey = await call(base, 'POST', '/api/api-keys', { token: apiKey, body: {} });
    expect(mintWithKey.status).toBe(401);
  });

  it('answers 401 unauthorized for an expired token', async () => {
    clockOffsetMs = -2 * 60 * 60_000;
    let signIn;
    try {
      signIn = await signInOverHttp(base, randomWallet());
    } finally {
      clockOffsetMs = 0;
    }
    expect(Date.parse(signIn.expiresAt)).toBeLessThan(Date.now());
    const answer = await call(base, 'GET', '/api/api-keys', { token: signIn.token });
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(unauthorized);
  });

  it('accepts the scheme in any case', async () => {
    const { token } = await signInOverHttp(base, randomWallet());
    const answer = await call(base, 'GET', '/api/api-keys', {
      headers: { authorization: `bearer ${token}` },
    });
    expect(answer.status).toBe(200);
  });
});

describe('request ids and logs', () => {
  it('echoes a request id it is given and makes one otherwise', async () => {
    const given = await call(base, 'GET', '/api/api-keys', { headers: { 'x-request-id': 'trace-123.abc' } });
    expect(given.headers.get('x-request-id')).toBe('trace-123.abc');
    const made = await call(base, 'GET', '/healthz');
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const unsafe = await call(base, 'GET', '/healthz', { headers: { 'x-request-id': 'a b<script>' } });
    expect(unsafe.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('logs each request with its id and never the token, the key or the signature', async () => {
    const wallet = randomWallet();
    const { token } = await signInOverHttp(base, wallet);
    const minted = await call(base, 'POST', '/api/api-keys', {
      token,
      body: {},
      headers: { 'x-request-id': 'log-check-1' },
    });
    const apiKey = (minted.body as { key: string }).key;
    // The access line is written when the response closes, which may be just after the client read it.
    await new Promise((resolve) => setTimeout(resolve, 50));
    const lines = logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).toContainEqual(
      expect.objectContaining({
        requestId: 'log-check-1',
        method: 'POST',
        path: '/api/api-keys',
        status: 201,
      }),
    );
    const everything = logLines.join('\n');
    expect(everything).not.toContain(token);
    expect(everything).not.toContain(apiKey);
    expect(everything).not.toContain(token.split('.')[2]!);
  });
});

describe('health', () => {
  it('answers /healthz and /readyz while the key-service is up', async () => {
    expect((await call(base, 'GET', '/healthz')).body).toEqual({ status: 'ok' });
    const ready = await call(base, 'GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready' });
  });

  it('is live but not ready when the key-service cannot be reached', async () => {
    const orphan = await startGateway({
      keyServiceAddress: '127.0.0.1:1',
      store: redis.open(),
      env: { READINESS_TIMEOUT: '500ms' },
    });
    try {
      expect((await call(orphan.baseUrl, 'GET', '/healthz')).status).toBe(200);
      const ready = await call(orphan.baseUrl, 'GET', '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body).toEqual({ status: 'not_ready' });
      // A request that needs the key-service fails as a plain 500 that leaks nothing.
      const failed = await call(
        orphan.baseUrl,
        'GET',
        `/api/auth/challenge?address=${randomWallet().address}`,
      );
      expect(failed.status).toBe(500);
      expect(failed.body).toEqual({ error: 'internal_error', message: 'The server failed to answer.' });
    } finally {
      await orphan.close();
    }
  });
});

describe('order of checks', () => {
  it('asks for a sign-in before it reads the body', async () => {
    const answer = await call(base, 'POST', '/api/api-keys', {
      rawBody: '{not json',
      headers: { 'content-type': 'application/json' },
    });
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual(unauthorized);
  });
});
