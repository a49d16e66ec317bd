import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ApiErrorName } from '@svc/api';
import { AppError, PAYMENT_REFUSAL_CODES } from '@svc/platform';
import { paymentSignatureFor } from '@svc/x402';
import type { HDNodeWallet } from 'ethers';
import { randomWallet, signInOverHttp } from '../support/http.js';
import { startKeyService, type RunningKeyService } from '../support/key-service.js';
import { createTestStore, type TestStore } from '../support/test-store.js';
import { mintKey, type MintedKey } from '../v1/support/keys.js';
import { ScriptedBackend } from '../v1/support/scripted-backend.js';
import { REQUIREMENTS, ScriptedSettler } from '../v1/support/scripted-settler.js';
import { startV1Gateway, type V1Gateway } from '../v1/support/v1-gateway.js';
import { OpenApiChecker } from './support/openapi-checker.js';
import type { CompletionEvent, CompletionRequest } from '../../src/v1/completion-backend.js';

// The OpenAPI document a live gateway serves, against that gateway's own answers: every documented route,
// status and error code is exercised (a real key-service on PostgreSQL; the job-orchestrator and the
// payment-settler are scripted at their ports), each answer's status must be documented for its route, its
// body and headers must validate against the document, and the last test fails for anything documented
// that no test exercised.

const DELEGATE_ENTRY = {
  scheme: 'delegate',
  chain_id: 31337,
  payer: `0x${'22'.repeat(20)}`,
  delegate: `0x${'33'.repeat(20)}`,
};

/** Models that fail with a catalogue error before any event, as the job-orchestrator would. */
const SCRIPTED_FAILURES: readonly ApiErrorName[] = [
  'context_length_exceeded',
  'delegate_not_authorized',
  'insufficient_balance',
  'allowance_exhausted',
  'session_open_limit_exceeded',
  'internal',
  'unexpected_settle_error',
  'blob_fee_too_high',
];

const PAYABLE: ReadonlySet<ApiErrorName> = new Set([
  'delegate_not_authorized',
  'insufficient_balance',
  'allowance_exhausted',
]);

/** A backend whose every port fails as a bug would: the gateway must answer 500, documented. */
class BrokenBackend extends ScriptedBackend {
  override async listModels(): Promise<never> {
    throw new Error('listing broke');
  }
  override async describeChain(): Promise<never> {
    throw new Error('chain broke');
  }
  // eslint-disable-next-line require-yield
  override async *runCompletion(_request: CompletionRequest): AsyncIterable<CompletionEvent> {
    throw new Error('completion broke');
  }
}

let redis: TestStore;
let tightRedis: TestStore;
let keyService: RunningKeyService;
let backend: ScriptedBackend;
let settler: ScriptedSettler;
/** Completions on, per-call payments taken, limits out of the way. */
let main: V1Gateway;
/** Limits of one or two calls, for the 429s. */
let tight: V1Gateway;
/** No job-orchestrator and no payment-settler: completions off. */
let bare: V1Gateway;
/** A key-service that does not answer and a backend that throws: 500s. */
let broken: V1Gateway;
let checker: OpenApiChecker;

const hello = [{ role: 'user' as const, content: 'hello' }];

interface Call {
  readonly token?: string;
  readonly body?: unknown;
  readonly rawBody?: string;
  readonly headers?: Record<string, string>;
}

/** Calls `gateway` and checks the answer against the document under the route template `template`. */
async function checked(
  gateway: V1Gateway,
  method: string,
  template: string,
  path: string,
  options: Call = {},
): Promise<{ status: number; headers: Headers; body: unknown }> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined = options.rawBody;
  if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] ??= 'application/json';
  }
  const response = await fetch(`${gateway.baseUrl}${path}`, { method, headers, body });
  const text = await response.text();
  const answer = { status: response.status, headers: response.headers, text };
  return { ...answer, body: checker.check(method, template, answer) };
}

const completions = (gateway: V1Gateway, options: Call) =>
  checked(gateway, 'POST', '/v1/chat/completions', '/v1/chat/completions', options);

function codeOf(answer: { body: unknown }): unknown {
  const { error } = answer.body as { error: unknown };
  return typeof error === 'object' && error !== null ? (error as { code: unknown }).code : error;
}

beforeAll(async () => {
  redis = createTestStore();
  tightRedis = createTestStore();
  keyService = await startKeyService(redis.open());
  backend = new ScriptedBackend();
  for (const code of SCRIPTED_FAILURES)
    backend.scriptFailure(`fail-${code}`, {
      // The delegate path's 402s carry the transaction to send in `accepts`.
      error: () =>
        new AppError(code, {
          ...(PAYABLE.has(code) ? { fields: { accepts: [DELEGATE_ENTRY] } } : {}),
          // The job-orchestrator's session-open budget says when a session frees.
          ...(code === 'session_open_limit_exceeded' ? { retryAfterSeconds: 20 } : {}),
        }),
      jobSubmitted: false,
    });
  settler = new ScriptedSettler();
  const common = { keyServiceAddress: keyService.address, completions: backend, settler };
  main = await startV1Gateway({
    ...common,
    store: redis.open(),
    env: { V1_KEY_RATE_LIMIT: '1000', SIGN_IN_RATE_LIMIT: '1000', KEY_ROUTES_RATE_LIMIT: '1000' },
  });
  tight = await startV1Gateway({
    ...common,
    store: tightRedis.open(),
    env: {
      V1_KEY_RATE_LIMIT: '2',
      V1_KEY_CONCURRENCY_LIMIT: '1',
      SIGN_IN_RATE_LIMIT: '1',
      KEY_ROUTES_RATE_LIMIT: '1',
    },
  });
  bare = await startV1Gateway({ keyServiceAddress: keyService.address, store: redis.open() });
  broken = await startV1Gateway({
    keyServiceAddress: '127.0.0.1:1',
    store: redis.open(),
    completions: new BrokenBackend(),
    env: { KEY_SERVICE_TIMEOUT: '2s' },
  });
  const served = await fetch(`${main.baseUrl}/openapi.json`);
  checker = new OpenApiChecker((await served.json()) as Record<string, unknown>);
});

afterAll(async () => {
  backend?.releaseHeld();
  await Promise.all([main?.close(), tight?.close(), bare?.close(), broken?.close()]);
  await keyService?.close();
  await redis?.cleanup();
  await tightRedis?.cleanup();
});

describe('GET /openapi.json', () => {
  it('is served without a credential, cacheable, as the document it describes', async () => {
    const answer = await checked(main, 'GET', '/openapi.json', '/openapi.json');
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toMatch(/^public, max-age=\d+$/);
    expect(answer.body).toEqual(checker.document);
  });
});

describe('sign-in', () => {
  it('answers the challenge and the verification as documented', async () => {
    const wallet = randomWallet();
    const challenge = await checked(
      main,
      'GET',
      '/api/auth/challenge',
      `/api/auth/challenge?address=${wallet.address}`,
    );
    expect(challenge.status).toBe(200);
    const { message } = challenge.body as { message: string };
    const verified = await checked(main, 'POST', '/api/auth/verify', '/api/auth/verify', {
      body: { message, signature: await wallet.signMessage(message) },
    });
    expect(verified.status).toBe(200);

    const missing = await checked(main, 'GET', '/api/auth/challenge', '/api/auth/challenge');
    expect(missing.status).toBe(400);
    const malformed = await checked(main, 'POST', '/api/auth/verify', '/api/auth/verify', { body: {} });
    expect(malformed.status).toBe(400);
    const other = randomWallet();
    const again = await checked(
      main,
      'GET',
      '/api/auth/challenge',
      `/api/auth/challenge?address=${wallet.address}`,
    );
    const forged = await checked(main, 'POST', '/api/auth/verify', '/api/auth/verify', {
      body: {
        message: (again.body as { message: string }).message,
        signature: await other.signMessage((again.body as { message: string }).message),
      },
    });
    expect(forged.status).toBe(401);
  });
});

describe('key routes', () => {
  let token: string;
  beforeAll(async () => {
    ({ token } = await signInOverHttp(main.baseUrl, randomWallet()));
  });

  const mint = (body: unknown = {}, auth = token) =>
    checked(main, 'POST', '/api/api-keys', '/api/api-keys', { token: auth, body });

  it('mints, lists, caps, revokes and deletes, refusing what the states forbid', async () => {
    const minted = await mint({ name: 'openapi', spendCapWei: '1000' });
    expect(minted.status).toBe(201);
    const { id } = minted.body as { id: string };
    const keyPath = `/api/api-keys/${id}`;

    expect((await checked(main, 'GET', '/api/api-keys', '/api/api-keys', { token })).status).toBe(200);
    const capped = await checked(main, 'PATCH', '/api/api-keys/{id}', keyPath, {
      token,
      body: { spendCapWei: null },
    });
    expect(capped.status).toBe(200);
    const active = await checked(main, 'DELETE', '/api/api-keys/{id}', keyPath, { token });
    expect(codeOf(active)).toBe('api_key_active');
    const revoked = await checked(main, 'POST', '/api/api-keys/{id}/revoke', `${keyPath}/revoke`, { token });
    expect(revoked.status).toBe(204);
    const patchRevoked = await checked(main, 'PATCH', '/api/api-keys/{id}', keyPath, {
      token,
      body: { spendCapWei: '5' },
    });
    expect(codeOf(patchRevoked)).toBe('api_key_revoked');
    expect((await checked(main, 'DELETE', '/api/api-keys/{id}', keyPath, { token })).status).toBe(204);
  });

  it('refuses bad requests, unknown keys and missing tokens', async () => {
    expect(codeOf(await mint({ name: 'n'.repeat(65) }))).toBe('invalid_request');
    expect(codeOf(await mint({}, 'not-a-token'))).toBe('unauthorized');
    expect(
      codeOf(await checked(main, 'GET', '/api/api-keys', '/api/api-keys', { token: 'not-a-token' })),
    ).toBe('unauthorized');

    const unknown = `/api/api-keys/${randomUUID()}`;
    const badPath = '/api/api-keys/%ZZ';
    const routes = [
      ['PATCH', '/api/api-keys/{id}', ''],
      ['POST', '/api/api-keys/{id}/revoke', '/revoke'],
      ['DELETE', '/api/api-keys/{id}', ''],
    ] as const;
    for (const [method, template, suffix] of routes) {
      const body = method === 'PATCH' ? { spendCapWei: '1' } : undefined;
      const notFound = await checked(main, method, template, `${unknown}${suffix}`, { token, body });
      expect(codeOf(notFound)).toBe('api_key_not_found');
      const undecodable = await checked(main, method, template, `${badPath}${suffix}`, { token, body });
      expect(codeOf(undecodable)).toBe('invalid_request');
      const anonymous = await checked(main, method, template, `${unknown}${suffix}`, { body });
      expect(codeOf(anonymous)).toBe('unauthorized');
    }
    const numberCap = await checked(main, 'PATCH', '/api/api-keys/{id}', unknown, {
      token,
      body: { spendCapWei: 5 },
    });
    expect(codeOf(numberCap)).toBe('invalid_request');
  });

  it('lists usage (an extension) for the sign-in token only', async () => {
    const usage = await checked(main, 'GET', '/api/usage', '/api/usage', { token });
    expect(usage.status).toBe(200);
    expect(codeOf(await checked(main, 'GET', '/api/usage', '/api/usage'))).toBe('unauthorized');
    const twice = await checked(main, 'GET', '/api/usage', '/api/usage?limit=1&limit=2', { token });
    expect(codeOf(twice)).toBe('invalid_request');
  });

  it('refuses a 26th active key with 409 api_key_limit', async () => {
    const { token: full } = await signInOverHttp(main.baseUrl, randomWallet());
    for (let index = 0; index < 25; index += 1) expect((await mint({}, full)).status).toBe(201);
    expect(codeOf(await mint({}, full))).toBe('api_key_limit');
  });
});

describe('GET /api/chain', () => {
  it('names the chain, and answers 503 not_configured on a server without completions', async () => {
    expect((await checked(main, 'GET', '/api/chain', '/api/chain')).status).toBe(200);
    expect(codeOf(await checked(bare, 'GET', '/api/chain', '/api/chain'))).toBe('not_configured');
  });
});

describe('/v1', () => {
  let key: MintedKey;
  beforeAll(async () => {
    key = await mintKey(main.baseUrl);
  });

  it('lists models for a key and refuses a call without one', async () => {
    const listed = await checked(main, 'GET', '/v1/models', '/v1/models', { token: key.key });
    expect(listed.status).toBe(200);
    const refused = await checked(main, 'GET', '/v1/models', '/v1/models');
    expect(codeOf(refused)).toBe('invalid_api_key');
  });

  it('answers a completion as JSON and as a stream, and a stream that fails after its first chunk', async () => {
    const answer = await completions(main, { token: key.key, body: { model: 'echo:1b', messages: hello } });
    expect(answer.status).toBe(200);
    const streamed = await completions(main, {
      token: key.key,
      body: { model: 'echo:1b', messages: hello, stream: true },
    });
    expect(streamed.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect((streamed.body as string[]).at(-1)).toBe('[DONE]');
    for (const model of ['fail-after', 'diverge']) {
      const failed = await completions(main, {
        token: key.key,
        body: { model, messages: hello, stream: true },
      });
      expect(failed.status).toBe(200);
      expect((failed.body as string[]).at(-1)).not.toBe('[DONE]');
    }
  });

  it('refuses a completion with each documented error before it runs', async () => {
    const withKey = (body: Record<string, unknown>, token = key.key) =>
      completions(main, { token, body: { messages: hello, ...body } });

    expect(codeOf(await withKey({ model: 'echo:1b', messages: [] }))).toBeNull();
    expect(codeOf(await withKey({ model: 'echo:1b' }, 'svc_unknown'))).toBe('invalid_api_key');
    expect(codeOf(await withKey({ model: 'missing' }))).toBe('model_not_found');
    expect(codeOf(await withKey({ model: 'fail-before' }))).toBe('job_failed');
    expect(codeOf(await withKey({ model: 'no-worker' }))).toBe('no_worker_available');
    for (const code of SCRIPTED_FAILURES)
      expect(codeOf(await withKey({ model: `fail-${code}` }))).toBe(code === 'internal' ? null : code);

    const capped = await mintKey(main.baseUrl, { spendCapWei: '0' });
    expect(codeOf(await withKey({ model: 'echo:1b' }, capped.key))).toBe('spend_cap_exceeded');
  });

  it('answers per-call payments: required, refused with each code, unverifiable, and paid', async () => {
    const keyless = (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
      completions(main, { body: { model: 'echo:1b', messages: hello, ...body }, headers });
    expect(codeOf(await keyless({}))).toBe('payment_required');
    expect(codeOf(await keyless({}, { 'payment-signature': 'not base64 json' }))).toBe('invalid_payload');

    for (const code of PAYMENT_REFUSAL_CODES) {
      const payer: HDNodeWallet = randomWallet();
      settler.refuse(payer.address, code);
      const refused = await keyless(
        {},
        { 'payment-signature': await paymentSignatureFor(payer, REQUIREMENTS) },
      );
      expect(codeOf(refused)).toBe(code);
    }

    settler.requirementsDown = true;
    try {
      expect(codeOf(await keyless({}))).toBe('unexpected_verify_error');
    } finally {
      settler.requirementsDown = false;
    }

    const paid = await keyless(
      {},
      { 'payment-signature': await paymentSignatureFor(randomWallet(), REQUIREMENTS) },
    );
    expect(paid.status).toBe(200);
    expect(paid.headers.get('payment-response')).not.toBeNull();
  });

  it('answers 503 not_configured, and 400 unsupported_scheme for a payment, on a server without completions', async () => {
    expect(
      codeOf(await completions(bare, { token: key.key, body: { model: 'echo:1b', messages: hello } })),
    ).toBe('not_configured');
    const payment = await paymentSignatureFor(randomWallet(), REQUIREMENTS);
    const refused = await completions(bare, {
      body: { model: 'echo:1b', messages: hello },
      headers: { 'payment-signature': payment },
    });
    expect(codeOf(refused)).toBe('unsupported_scheme');
  });
});

describe('request bodies', () => {
  // Each body is sent to the gateway and checked against the document's request schema: the gateway refuses
  // it with a 400 exactly when the schema refuses it. What JSON Schema cannot say is left out: a cap above
  // 2^256 - 1 (78 digits that pass the pattern), and the last message not being the user's.
  let token: string;
  let keyId: string;
  beforeAll(async () => {
    ({ token } = await signInOverHttp(main.baseUrl, randomWallet()));
    const minted = await checked(main, 'POST', '/api/api-keys', '/api/api-keys', { token, body: {} });
    keyId = (minted.body as { id: string }).id;
  });

  async function expectAgreement(
    method: string,
    template: string,
    path: string,
    bodies: unknown[],
    auth?: string,
  ) {
    for (const body of bodies) {
      const answer = await checked(main, method, template, path, {
        ...(auth === undefined ? {} : { token: auth }),
        rawBody: JSON.stringify(body),
        headers: { 'content-type': 'application/json' },
      });
      const accepted = checker.acceptsRequest(method, template, body);
      expect({ body, refused: answer.status === 400 }).toEqual({ body, refused: !accepted });
    }
  }

  it('POST /api/api-keys', async () => {
    await expectAgreement(
      'POST',
      '/api/api-keys',
      '/api/api-keys',
      [
        {},
        { name: null, spendCapWei: null },
        { name: 'é'.repeat(64) },
        { name: '😀'.repeat(64), spendCapWei: '007' },
        { name: 'x'.repeat(65) },
        { name: 'a\tb' },
        { name: '\u0085' },
        { name: '\ud800' },
        { name: 5 },
        { spendCapWei: '0', ignored: true },
        { spendCapWei: 5 },
        { spendCapWei: '-1' },
        { spendCapWei: ' 1' },
        { spendCapWei: '1'.repeat(79) },
        { spendCapWei: '１００' },
        [],
        'a string',
      ],
      token,
    );
  });

  it('PATCH /api/api-keys/{id}', async () => {
    await expectAgreement(
      'PATCH',
      '/api/api-keys/{id}',
      `/api/api-keys/${keyId}`,
      [{ spendCapWei: '1' }, { spendCapWei: null }, {}, { spendCapWei: 1 }, { spendCapWei: 'abc' }, null],
      token,
    );
  });

  it('POST /api/auth/verify', async () => {
    await expectAgreement('POST', '/api/auth/verify', '/api/auth/verify', [
      { message: 'not the challenge', signature: `0x${'11'.repeat(65)}` },
      { message: 'm', signature: `0x${'11'.repeat(64)}` },
      { message: 'm' },
      { signature: '0x11' },
      { message: 1, signature: '0x11' },
      { message: 'm', signature: '0x1' },
      { message: 'm', signature: 'zz' },
      [],
    ]);
  });

  it('GET /api/usage query parameters', async () => {
    const corpus: [string, string][] = [
      ['limit', '1'],
      ['limit', '200'],
      ['limit', '007'],
      ['limit', '0'],
      ['limit', '201'],
      ['limit', '0200'],
      ['limit', 'ten'],
      ['from', '2026-11-26'],
      ['from', '2026-11-26T00:00:00Z'],
      ['to', '2026-11-26T01:02:03.5+02:00'],
      ['from', 'yesterday'],
      ['to', '2026-11-26T00:00'],
      ['key', randomUUID()],
      ['key', ''],
      ['key', 'k'.repeat(65)],
    ];
    for (const [name, value] of corpus) {
      const path = `/api/usage?${new URLSearchParams({ [name]: value }).toString()}`;
      const answer = await checked(main, 'GET', '/api/usage', path, { token });
      const accepted = checker.acceptsQuery('GET', '/api/usage', name, value);
      expect({ name, value, refused: answer.status === 400 }).toEqual({ name, value, refused: !accepted });
    }
  });

  it('POST /v1/chat/completions', async () => {
    const key = await mintKey(main.baseUrl);
    await expectAgreement(
      'POST',
      '/v1/chat/completions',
      '/v1/chat/completions',
      [
        { model: 'echo:1b', messages: hello },
        { model: 'echo:1b', messages: hello, temperature: 0.2, stream: null, conversation_id: null },
        { model: 'echo:1b', messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }] }] },
        {
          model: 'echo:1b',
          messages: hello,
          conversation_id: 'c'.repeat(64),
          tools: [],
          tool_choice: 'none',
        },
        { messages: hello },
        { model: '', messages: hello },
        { model: 'echo:1b', messages: [] },
        { model: 'echo:1b', messages: [{ role: 'tool', content: 'x' }] },
        { model: 'echo:1b', messages: [{ role: 'user' }] },
        { model: 'echo:1b', messages: [{ role: 'user', content: 5 }] },
        { model: 'echo:1b', messages: [{ role: 'user', content: [{ type: 'image_url' }] }] },
        { model: 'echo:1b', messages: hello, stream: 'yes' },
        { model: 'echo:1b', messages: hello, tools: [{ type: 'function' }] },
        { model: 'echo:1b', messages: hello, tool_choice: 'auto' },
        { model: 'echo:1b', messages: hello, conversation_id: 'c'.repeat(65) },
        { model: 'echo:1b', messages: hello, conversation_id: '😀'.repeat(64) },
        [],
      ],
      key.key,
    );
  });
});

describe('limits', () => {
  it('answers 429 with retry-after on every rate-limited route', async () => {
    const address = () => ({ 'x-forwarded-for': `198.51.100.${Math.floor(Math.random() * 250) + 1}` });
    const first = address();
    const wallet = randomWallet();
    const challengePath = `/api/auth/challenge?address=${wallet.address}`;
    const challenge = await checked(tight, 'GET', '/api/auth/challenge', challengePath, { headers: first });
    expect(challenge.status).toBe(200);
    const again = await checked(tight, 'GET', '/api/auth/challenge', challengePath, { headers: first });
    expect(codeOf(again)).toBe('rate_limit_exceeded');
    const message = (challenge.body as { message: string }).message;
    const verify = await checked(tight, 'POST', '/api/auth/verify', '/api/auth/verify', {
      headers: first,
      body: { message, signature: await wallet.signMessage(message) },
    });
    expect(codeOf(verify)).toBe('rate_limit_exceeded');

    const chainFrom = address();
    expect((await checked(tight, 'GET', '/api/chain', '/api/chain', { headers: chainFrom })).status).toBe(
      200,
    );
    expect(codeOf(await checked(tight, 'GET', '/api/chain', '/api/chain', { headers: chainFrom }))).toBe(
      'rate_limit_exceeded',
    );

    // One key-management call per wallet per window: the first is served, every other refused.
    const key = await mintKey(main.baseUrl);
    const keyPath = `/api/api-keys/${key.id}`;
    expect((await checked(tight, 'GET', '/api/api-keys', '/api/api-keys', { token: key.token })).status).toBe(
      200,
    );
    for (const [method, template, path, body] of [
      ['GET', '/api/api-keys', '/api/api-keys', undefined],
      ['POST', '/api/api-keys', '/api/api-keys', {}],
      ['PATCH', '/api/api-keys/{id}', keyPath, { spendCapWei: '1' }],
      ['POST', '/api/api-keys/{id}/revoke', `${keyPath}/revoke`, undefined],
      ['DELETE', '/api/api-keys/{id}', keyPath, undefined],
      ['GET', '/api/usage', '/api/usage', undefined],
    ] as const)
      expect(codeOf(await checked(tight, method, template, path, { token: key.token, body }))).toBe(
        'rate_limit_exceeded',
      );
  });

  it('answers 429 concurrency_limit_exceeded for a call over the key slots, and 429 rate_limit_exceeded past the rate', async () => {
    const key = await mintKey(main.baseUrl);
    const held = await fetch(`${tight.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'hold', messages: hello, stream: true }),
    });
    expect(held.status).toBe(200);
    const reader = held.body!.getReader();
    await reader.read();
    try {
      const busy = await completions(tight, { token: key.key, body: { model: 'echo:1b', messages: hello } });
      expect(codeOf(busy)).toBe('concurrency_limit_exceeded');
      const models = await checked(tight, 'GET', '/v1/models', '/v1/models', { token: key.key });
      expect(codeOf(models)).toBe('rate_limit_exceeded');
      const call = await completions(tight, { token: key.key, body: { model: 'echo:1b', messages: hello } });
      expect(codeOf(call)).toBe('rate_limit_exceeded');
    } finally {
      backend.releaseHeld();
      while (!(await reader.read()).done);
    }
  });
});

describe('a server that fails', () => {
  it('answers 500 on every route, in the route surface shape', async () => {
    const wallet = randomWallet();
    const routes = [
      ['GET', '/api/auth/challenge', `/api/auth/challenge?address=${wallet.address}`, undefined],
      ['POST', '/api/auth/verify', '/api/auth/verify', { message: 'm', signature: `0x${'11'.repeat(65)}` }],
      ['GET', '/api/chain', '/api/chain', undefined],
      ['GET', '/api/api-keys', '/api/api-keys', undefined],
      ['POST', '/api/api-keys', '/api/api-keys', {}],
      ['PATCH', '/api/api-keys/{id}', `/api/api-keys/${randomUUID()}`, { spendCapWei: '1' }],
      ['POST', '/api/api-keys/{id}/revoke', `/api/api-keys/${randomUUID()}/revoke`, undefined],
      ['DELETE', '/api/api-keys/{id}', `/api/api-keys/${randomUUID()}`, undefined],
      ['GET', '/api/usage', '/api/usage', undefined],
      ['GET', '/v1/models', '/v1/models', undefined],
      ['POST', '/v1/chat/completions', '/v1/chat/completions', { model: 'echo:1b', messages: hello }],
    ] as const;
    for (const [method, template, path, body] of routes) {
      // A token the key-service would have to check: a JWT's form, for the key routes; a key, for /v1.
      const token = path.startsWith('/v1') ? `svc_${'a'.repeat(43)}` : 'eyJhbGciOiJFUzI1NiJ9.e30.c2ln';
      const answer = await checked(broken, method, template, path, { token, body });
      expect({ path, status: answer.status }).toEqual({ path, status: 500 });
    }
  });
});

describe('coverage', () => {
  it('exercised every route, status and error code the document names', () => {
    const missing = checker.documented().filter((observation) => !checker.seen.has(observation));
    expect(missing).toEqual([]);
  });
});
