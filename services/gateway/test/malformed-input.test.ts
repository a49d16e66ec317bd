import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createKeyServiceModule, generateKeyServiceSecrets } from '@svc/key-service';
import { createLogger, type Logger } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { runTarget } from '@svc/runtime';
import { createTestDatabase } from '@svc/testkit';
import fc from 'fast-check';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { randomWallet, signInOverHttp } from './support/http.js';
import { TEST_SIWE } from './support/key-service.js';
import { sendRaw, type RawAnswer, type RawRequest } from './support/raw-http.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// Malformed input of every kind, on every route, with and without valid credentials, must be answered
// with a 4xx in the route's documented error shape (or, for a valid completion or `/api/chain` on this
// server without a backend, 503 not_configured), and must never be logged as a server failure.

interface LogLine {
  readonly level: string;
  readonly msg?: string;
}

/** A logger at info level whose lines a test can read back. */
function capturingLogger(service: string, lines: LogLine[]): Logger {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim() !== '') lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return createLogger({ service, level: 'info', destination });
}

const gatewayLog: LogLine[] = [];
const keyServiceLog: LogLine[] = [];
let redis: TestStore;
let stopKeyService: () => Promise<void>;
let gateway: RunningGateway;
let base: string;
/** Sign-in token of the wallet whose keys the tests and the fuzzer manage. */
let token: string;
/** A key of that wallet, for PATCH/DELETE/revoke paths. */
let keyId: string;
/** An API key of another wallet, which the fuzzer never sees the token of (so it stays active). */
let apiKey: string;

const NO_LIMIT = '1000000';

beforeAll(async () => {
  redis = createTestStore();
  const database = await createTestDatabase({ prefix: 'gw' });
  const keyService = await runTarget(
    { name: 'key-service', modules: [createKeyServiceModule()] },
    {
      env: {
        ...TEST_SIWE,
        ...generateKeyServiceSecrets(),
        ...TEST_SERVICE_TOKEN_SETTINGS,
        DATABASE_URL: database.url,
        GRPC_PORT: '0',
        METRICS_PORT: '0',
      },
      provided: { store: redis.open() },
      logger: capturingLogger('key-service-test', keyServiceLog),
    },
  );
  stopKeyService = async () => {
    await keyService.stop();
    await database.drop();
  };
  gateway = await startGateway({
    keyServiceAddress: keyService.grpcAddress as string,
    store: redis.open(),
    env: {
      KEY_ROUTES_RATE_LIMIT: NO_LIMIT,
      SIGN_IN_RATE_LIMIT: NO_LIMIT,
      V1_KEY_RATE_LIMIT: NO_LIMIT,
      V1_BAD_KEY_RATE_LIMIT: NO_LIMIT,
      API_BAD_TOKEN_RATE_LIMIT: NO_LIMIT,
    },
    logger: capturingLogger('gateway-test', gatewayLog),
  });
  base = gateway.baseUrl;
  token = (await signInOverHttp(base, randomWallet())).token;
  keyId = (JSON.parse((await mint(token, {})).text) as { id: string }).id;
  const other = (await signInOverHttp(base, randomWallet())).token;
  apiKey = (JSON.parse((await mint(other, {})).text) as { key: string }).key;
});

afterAll(async () => {
  await gateway?.close();
  await stopKeyService?.();
  await redis?.cleanup();
});

function send(raw: RawRequest): Promise<RawAnswer> {
  return sendRaw(base, raw);
}

function mint(bearer: string, body: unknown): Promise<RawAnswer> {
  return send({
    method: 'POST',
    path: '/api/api-keys',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

const API_ERROR_CODES = new Set([
  'invalid_request',
  'unauthorized',
  'api_key_not_found',
  'api_key_limit',
  'api_key_revoked',
  'api_key_active',
  'rate_limit_exceeded',
  'not_configured',
  'not_found',
]);

/** The route family a raw path lands in, by its first segment (express routes case-insensitively). */
function surfaceOf(path: string): 'api' | 'v1' | 'root' {
  const first = (path.split('?')[0] ?? '').split('/')[1]?.toLowerCase();
  return first === 'api' ? 'api' : first === 'v1' ? 'v1' : 'root';
}

/**
 * Why an answer breaks the contract, or undefined when it keeps it: no 5xx (but 503 not_configured for a
 * completion or the chain here), and every error a JSON body in its surface's documented shape.
 */
function contractBreach(raw: RawRequest, answer: RawAnswer): string | undefined {
  const surface = surfaceOf(raw.path);
  const route = raw.path.toLowerCase().split('?')[0]?.replace(/\/+$/, '');
  const isCompletion = route === '/v1/chat/completions';
  // Without a backend this server names no chain: a body-less HEAD shows only the status.
  const isChain = route === '/api/chain';
  if (answer.status < 400) return undefined;
  // Node's own refusals, before any route sees the request (headers too large, too slow), carry no body.
  if (answer.text === '' && [408, 431].includes(answer.status)) return undefined;
  if (raw.method === 'HEAD')
    return answer.status >= 500 && !(isChain && answer.status === 503)
      ? `HEAD answered ${answer.status}`
      : undefined;
  if (!String(answer.headers['content-type']).startsWith('application/json'))
    return `error ${answer.status} is not JSON: ${answer.headers['content-type']} ${answer.text.slice(0, 200)}`;
  let body: unknown;
  try {
    body = JSON.parse(answer.text);
  } catch {
    return `error ${answer.status} body does not parse: ${answer.text.slice(0, 200)}`;
  }
  if (surface === 'v1') {
    const error = (body as { error?: Record<string, unknown> }).error;
    const shaped =
      typeof error === 'object' &&
      error !== null &&
      typeof error.message === 'string' &&
      typeof error.type === 'string' &&
      (error.param === null || typeof error.param === 'string') &&
      (error.code === null || typeof error.code === 'string');
    if (!shaped) return `not an OpenAI error body: ${answer.text.slice(0, 200)}`;
    if (answer.status >= 500 && !(isCompletion && answer.status === 503 && error.code === 'not_configured'))
      return `answered ${answer.status}: ${answer.text.slice(0, 200)}`;
    return undefined;
  }
  const { error, message, ...rest } = body as Record<string, unknown>;
  if (answer.status >= 500 && !(isChain && answer.status === 503 && error === 'not_configured'))
    return `answered ${answer.status}: ${answer.text.slice(0, 200)}`;
  if (typeof error !== 'string' || !API_ERROR_CODES.has(error) || typeof message !== 'string')
    return `not an { error, message } body: ${answer.text.slice(0, 200)}`;
  if (Object.keys(rest).length > 0) return `extra fields in ${answer.text.slice(0, 200)}`;
  if (surface === 'root' && error !== 'not_found') return `root answered ${answer.text.slice(0, 200)}`;
  return undefined;
}

async function expectContractKept(raw: RawRequest): Promise<RawAnswer> {
  const answer = await send(raw);
  const breach = contractBreach(raw, answer);
  if (breach !== undefined)
    throw new Error(`${raw.method} ${raw.path} ${JSON.stringify(raw.headers)}: ${breach}`);
  return answer;
}

function errorOf(answer: RawAnswer): unknown {
  try {
    return JSON.parse(answer.text);
  } catch {
    return { status: answer.status, text: answer.text };
  }
}

const invalidRequest = { error: 'invalid_request', message: expect.any(String) };
const v1InvalidRequest = {
  error: {
    message: expect.any(String),
    type: 'invalid_request_error',
    param: expect.any(String),
    code: null,
  },
};

function withBearer(bearer: string | undefined, headers: Record<string, string> = {}) {
  return bearer === undefined ? headers : { ...headers, authorization: `Bearer ${bearer}` };
}

const VERIFY_BODY = JSON.stringify({ message: 'hello', signature: `0x${'1'.repeat(130)}` });

describe('a Content-Encoding the body does not have', () => {
  const routes = (): [string, string, string | undefined, string][] => [
    ['POST', '/api/auth/verify', undefined, VERIFY_BODY],
    ['POST', '/api/api-keys', token, JSON.stringify({ name: 'x' })],
    ['PATCH', `/api/api-keys/${keyId}`, token, JSON.stringify({ spendCapWei: '1' })],
    ['POST', `/api/api-keys/${keyId}/revoke`, token, '{}'],
    ['DELETE', `/api/api-keys/${keyId}`, token, '{}'],
  ];

  it.each(['gzip', 'deflate', 'br', 'GZIP', 'gzip, br'])(
    'is 400 invalid_request on every /api route with a body (%s)',
    async (encoding) => {
      for (const [method, path, bearer, body] of routes()) {
        const answer = await expectContractKept({
          method,
          path,
          headers: withBearer(bearer, { 'content-type': 'application/json', 'content-encoding': encoding }),
          body,
        });
        expect([method, path, answer.status, errorOf(answer)]).toEqual([method, path, 400, invalidRequest]);
      }
    },
  );

  it.each(['gzip', 'deflate', 'br'])('is 400 (code null) on a completion (%s)', async (encoding) => {
    const answer = await expectContractKept({
      method: 'POST',
      path: '/v1/chat/completions',
      headers: withBearer(apiKey, { 'content-type': 'application/json', 'content-encoding': encoding }),
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(answer.status).toBe(400);
    expect(errorOf(answer)).toEqual(v1InvalidRequest);
  });

  it.each(['compress', 'zstd', 'x-unknown'])(
    'is 400 for an encoding the server does not take (%s)',
    async (encoding) => {
      const api = await expectContractKept({
        method: 'POST',
        path: '/api/api-keys',
        headers: withBearer(token, { 'content-encoding': encoding }),
        body: '{}',
      });
      expect([api.status, errorOf(api)]).toEqual([400, invalidRequest]);
      const v1 = await expectContractKept({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: withBearer(apiKey, { 'content-type': 'application/json', 'content-encoding': encoding }),
        body: '{}',
      });
      expect([v1.status, errorOf(v1)]).toEqual([400, v1InvalidRequest]);
    },
  );

  it('still reads a body that really is gzip', async () => {
    const answer = await send({
      method: 'POST',
      path: '/api/api-keys',
      headers: withBearer(token, { 'content-type': 'application/json', 'content-encoding': 'gzip' }),
      body: gzipSync(JSON.stringify({ name: 'zipped' })),
    });
    expect(answer.status).toBe(201);
    expect((errorOf(answer) as { name: string }).name).toBe('zipped');
  });
});

describe('a malformed percent-encoding in a path', () => {
  it.each(['%ZZ', '%', '%E0%A4%A', 'a%2', '%C0%AF'])(
    'is 400 invalid_request on every key route with an id (%s)',
    async (id) => {
      for (const [method, suffix] of [
        ['PATCH', ''],
        ['DELETE', ''],
        ['POST', '/revoke'],
      ] as const) {
        const answer = await expectContractKept({
          method,
          path: `/api/api-keys/${id}${suffix}`,
          headers: withBearer(token, { 'content-type': 'application/json' }),
          body: JSON.stringify({ spendCapWei: '1' }),
        });
        expect([method, answer.status, errorOf(answer)]).toEqual([method, 400, invalidRequest]);
      }
    },
  );

  it.each(['%00', '%F0%9F%94%91', '%2F'])(
    'that decodes (%s) names no key: 404 api_key_not_found',
    async (id) => {
      const answer = await expectContractKept({
        method: 'DELETE',
        path: `/api/api-keys/${id}`,
        headers: withBearer(token),
      });
      expect([answer.status, errorOf(answer)]).toEqual([
        404,
        { error: 'api_key_not_found', message: expect.any(String) },
      ]);
    },
  );

  it('is 401 without a sign-in token: the token is checked first', async () => {
    const answer = await expectContractKept({ method: 'DELETE', path: '/api/api-keys/%ZZ' });
    expect([answer.status, errorOf(answer)]).toEqual([
      401,
      { error: 'unauthorized', message: expect.any(String) },
    ]);
  });

  it.each(['/v1/%ZZ', '/%ZZ', '/api/%ZZ', '/api/auth/%ZZ'])(
    'is a 404 in the surface shape on %s',
    async (path) => {
      const answer = await expectContractKept({ method: 'GET', path, headers: withBearer(apiKey) });
      expect(answer.status).toBe(404);
    },
  );
});

describe('a key name', () => {
  it.each([
    ['NUL', 'a\u0000b'],
    ['only NUL', '\u0000'],
    ['a bell', 'ding\u0007'],
    ['an escape sequence', '\u001b[31mred'],
    ['a tab', 'a\tb'],
    ['a newline', 'line\nbreak'],
    ['DEL', 'x\u007f'],
    ['a C1 control', 'x\u0085y'],
    ['a lone surrogate', 'x\ud800y'],
  ])('with %s is 400 invalid_request', async (_case, name) => {
    const answer = await expectContractKept({
      method: 'POST',
      path: '/api/api-keys',
      headers: withBearer(token, { 'content-type': 'application/json' }),
      body: JSON.stringify({ name }),
    });
    expect([answer.status, errorOf(answer)]).toEqual([400, invalidRequest]);
    expect((errorOf(answer) as { message: string }).message).toMatch(/name/);
  });

  it.each([
    ['accents', 'clé de production'],
    ['CJK', '本番キー'],
    ['emoji (outside the BMP)', '🔑'.repeat(64)],
    ['a zero-width joiner sequence', '👩‍💻 dev'],
  ])('with %s is taken as sent', async (_case, name) => {
    const answer = await mint(token, { name });
    expect(answer.status).toBe(201);
    expect((errorOf(answer) as { name: string }).name).toBe(name);
    await send({
      method: 'POST',
      path: `/api/api-keys/${(errorOf(answer) as { id: string }).id}/revoke`,
      headers: withBearer(token),
    });
  });

  it('over 64 characters is 400 invalid_request', async () => {
    const answer = await mint(token, { name: '🔑'.repeat(65) });
    expect([answer.status, errorOf(answer)]).toEqual([400, invalidRequest]);
  });
});

describe('spendCapWei', () => {
  it.each([
    ['a leading no-break space', '\u00a0100'],
    ['a trailing em space', '100\u2003'],
    ['an ideographic space', '\u3000'],
    ['full-width digits', '１００'],
    ['Arabic-Indic digits', '١٠٠'],
    ['a leading space', ' 100'],
    ['a trailing newline', '100\n'],
    ['a sign', '+100'],
    ['a line separator', '100\u2028'],
    ['a byte order mark', '\ufeff100'],
  ])('with %s is 400 invalid_request on mint and PATCH', async (_case, spendCapWei) => {
    const minted = await mint(token, { spendCapWei });
    expect([minted.status, errorOf(minted)]).toEqual([400, invalidRequest]);
    const patched = await send({
      method: 'PATCH',
      path: `/api/api-keys/${keyId}`,
      headers: withBearer(token, { 'content-type': 'application/json' }),
      body: JSON.stringify({ spendCapWei }),
    });
    expect([patched.status, errorOf(patched)]).toEqual([400, invalidRequest]);
  });
});

describe('bodies that are not what the route reads', () => {
  const bodies: [string, Buffer | string, Record<string, string>][] = [
    ['invalid JSON', '{"name":', {}],
    ['a JSON array', '[1,2]', {}],
    ['a JSON number', '42', {}],
    ['JSON null', 'null', {}],
    ['a JSON string', '"x"', {}],
    ['bytes that are not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0xfd, 0x7d]), {}],
    ['a latin1 charset', '{}', { 'content-type': 'application/json; charset=latin1' }],
    ['a UTF-16 charset', '{}', { 'content-type': 'application/json; charset=utf-16' }],
    ['a form body', 'name=x', { 'content-type': 'application/x-www-form-urlencoded' }],
    ['deeply nested arrays', `${'['.repeat(8_000)}${']'.repeat(8_000)}`, {}],
    ['deeply nested objects', `${'{"a":'.repeat(3_000)}1${'}'.repeat(3_000)}`, {}],
    ['a body over 16 KiB', JSON.stringify({ name: 'x'.repeat(20_000) }), {}],
    ['a __proto__ field', '{"__proto__":{"name":"x"},"name":{"toString":1}}', {}],
  ];

  it.each(bodies)('%s is 400 on every /api route that reads a body', async (_case, body, headers) => {
    for (const [method, path, bearer] of [
      ['POST', '/api/auth/verify', undefined],
      ['POST', '/api/api-keys', token],
      ['PATCH', `/api/api-keys/${keyId}`, token],
    ] as const) {
      const answer = await expectContractKept({
        method,
        path,
        headers: withBearer(bearer, { 'content-type': 'application/json', ...headers }),
        body,
      });
      expect([path, answer.status, errorOf(answer)]).toEqual([path, 400, invalidRequest]);
    }
  });

  it.each([
    ...bodies,
    ['nesting a million deep', `${'['.repeat(1_000_000)}${']'.repeat(1_000_000)}`, {}],
    [
      'a body over 4 MiB',
      JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x'.repeat(4_300_000) }] }),
      {},
    ],
  ] as [string, Buffer | string, Record<string, string>][])(
    '%s is 400 on a completion',
    async (_case, body, headers) => {
      const answer = await expectContractKept({
        method: 'POST',
        path: '/v1/chat/completions',
        headers: withBearer(apiKey, { 'content-type': 'application/json', ...headers }),
        body,
      });
      expect(answer.status).toBe(400);
      expect(errorOf(answer)).toEqual(v1InvalidRequest);
    },
  );

  it('a header block over the server limit is refused by the HTTP server, not answered 5xx', async () => {
    const answer = await expectContractKept({
      method: 'GET',
      path: '/api/api-keys',
      headers: withBearer(token, { 'x-padding': 'p'.repeat(20_000) }),
    });
    expect(answer.status).toBe(431);
  });
});

describe('unknown paths', () => {
  it.each([
    ['/nowhere', { error: 'not_found', message: expect.any(String) }],
    ['/api/nowhere', { error: 'not_found', message: expect.any(String) }],
    ['/v1/nowhere', { error: expect.objectContaining({ code: null, type: 'invalid_request_error' }) }],
  ])('%s answers 404 JSON in its shape', async (path, expected) => {
    const answer = await expectContractKept({ method: 'GET', path });
    expect([answer.status, errorOf(answer)]).toEqual([404, expected]);
  });
});

// ---- the fuzzer -------------------------------------------------------------------------------------

const printable = fc.string({
  unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 40,
});

/** A path segment: a real id, a malformed one, or anything printable (percent signs included). */
const segment = fc.oneof(
  fc.constant('{keyId}'),
  fc.constant(randomUUID()),
  fc.constantFrom('%ZZ', '%', '%E0%A4%A', '%00', '%2F', '..', '.', '', 'a'.repeat(300), '%F0%9F%94%91'),
  printable.map((text) => text.replace(/[/?#]/g, '')),
  fc.string({ maxLength: 20, unit: 'binary' }).map(encodeURIComponent),
);

const address = fc.oneof(
  fc.constant(randomWallet().address),
  fc.constantFrom('', '%ZZ', '0x', `0x${'g'.repeat(40)}`, `${randomWallet().address}%00`),
  printable.map(encodeURIComponent),
);

const path = fc.oneof(
  fc.constantFrom(
    '/healthz',
    '/readyz',
    '/api/auth/verify',
    '/api/api-keys',
    '/api/chain',
    '/',
    '/index.html',
    '/v1/models',
    '/v1/chat/completions',
  ),
  address.map((value) => `/api/auth/challenge?address=${value}`),
  fc.constantFrom(
    '/api/auth/challenge?address[]=1',
    '/api/auth/challenge?address=a&address=b',
    '/api/auth/challenge',
  ),
  segment.map((id) => `/api/api-keys/${id}`),
  segment.map((id) => `/api/api-keys/${id}/revoke`),
  fc
    .tuple(fc.constantFrom('', '/api', '/v1', '/API', '/V1', '/api/auth', '/v1/chat', '/assets'), segment)
    .map(([prefix, rest]) => `${prefix}/${rest}`),
);

const credential = fc.oneof(
  fc.constant(undefined),
  fc.constantFrom('{token}', '{apiKey}', 'svc_', `svc_${'A'.repeat(43)}`, 'a.b.c', 'x'.repeat(5_000)),
  printable,
);

const wideText = fc.oneof(
  fc.string({ maxLength: 80 }),
  fc.string({ maxLength: 80, unit: 'binary' }),
  fc.string({ maxLength: 10, unit: fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c)) }),
  fc.constantFrom('\u0000', '\u00a0100', '１００', '1'.repeat(79), (2n ** 256n).toString(), '0', '007'),
);

const field = fc.oneof(
  wideText,
  fc.jsonValue({ maxDepth: 2 }),
  fc.bigInt({ min: 0n, max: 2n ** 300n }).map(String),
);

const fieldsObject = fc.record(
  {
    name: field,
    spendCapWei: fc.oneof(field, fc.constant(null)),
    message: field,
    signature: fc.oneof(field, fc.constant(`0x${'ab'.repeat(65)}`)),
    model: field,
    messages: fc.oneof(
      fc.jsonValue({ maxDepth: 3 }),
      fc.array(
        fc.record({
          role: fc.oneof(fc.constantFrom('user', 'system', 'tool', 'assistant'), field),
          content: field,
        }),
        { maxLength: 3 },
      ),
    ),
    stream: fc.oneof(fc.boolean(), field),
    conversation_id: field,
  },
  { requiredKeys: [] },
);

const body: fc.Arbitrary<{ bytes?: Buffer | string; gzip?: boolean }> = fc.oneof(
  fc.constant({}),
  fieldsObject.map((value) => ({ bytes: JSON.stringify(value) })),
  fieldsObject.map((value) => ({ bytes: gzipSync(JSON.stringify(value)), gzip: true })),
  fc.jsonValue({ maxDepth: 3 }).map((value) => ({ bytes: JSON.stringify(value) ?? 'null' })),
  fc.string({ maxLength: 60, unit: 'binary' }).map((text) => ({ bytes: text })),
  fc.uint8Array({ maxLength: 60 }).map((bytes) => ({ bytes: Buffer.from(bytes) })),
  fc.integer({ min: 1, max: 20_000 }).map((depth) => ({ bytes: `${'['.repeat(depth)}${']'.repeat(depth)}` })),
);

const fuzzedRequest = fc.record({
  method: fc.constantFrom('GET', 'POST', 'PATCH', 'DELETE', 'PUT', 'HEAD', 'OPTIONS'),
  path,
  credential,
  contentType: fc.option(
    fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'application/json; charset=latin1',
      'application/json; charset=nope',
      'text/plain',
      'multipart/form-data; boundary=x',
      'application/x-www-form-urlencoded',
      '*/*',
      ';;;',
    ),
  ),
  contentEncoding: fc.option(
    fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'compress', 'zstd', 'gzip, br', 'x'),
  ),
  paymentSignature: fc.option(
    fc.oneof(printable, fc.constant(Buffer.from('{"x402Version":2}').toString('base64'))),
  ),
  requestId: fc.option(printable),
  body,
});

type FuzzedRequest = typeof fuzzedRequest extends fc.Arbitrary<infer T> ? T : never;

function rawOf(fuzzed: FuzzedRequest): RawRequest {
  const headers: Record<string, string> = {};
  const bearer =
    fuzzed.credential === '{token}' ? token : fuzzed.credential === '{apiKey}' ? apiKey : fuzzed.credential;
  if (bearer !== undefined) headers.authorization = `Bearer ${bearer}`;
  if (fuzzed.contentType !== null) headers['content-type'] = fuzzed.contentType;
  if (fuzzed.body.gzip) headers['content-encoding'] = 'gzip';
  else if (fuzzed.contentEncoding !== null) headers['content-encoding'] = fuzzed.contentEncoding;
  if (fuzzed.paymentSignature !== null) headers['payment-signature'] = fuzzed.paymentSignature;
  if (fuzzed.requestId !== null) headers['x-request-id'] = fuzzed.requestId;
  return {
    method: fuzzed.method,
    path: fuzzed.path.replace('{keyId}', keyId),
    headers,
    body: fuzzed.method === 'GET' || fuzzed.method === 'HEAD' ? undefined : fuzzed.body.bytes,
  };
}

describe('every route under fuzzed input', () => {
  it('never answers 5xx (but 503 not_configured to a valid completion or the chain) and keeps the error shapes', async () => {
    const statuses = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(fuzzedRequest, async (fuzzed) => {
        const answer = await expectContractKept(rawOf(fuzzed));
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      }),
      { numRuns: 1_000 },
    );
    // The fuzzer got past the credential checks to the routes themselves, not only to their refusals.
    expect([...statuses.keys()]).toEqual(expect.arrayContaining([200, 400, 401, 404]));
  }, 120_000);
});

describe('the logs', () => {
  it('hold no error for any of the requests above', () => {
    const failures = [...gatewayLog, ...keyServiceLog].filter(
      (line) => line.level === 'error' || line.level === 'fatal',
    );
    expect(failures).toEqual([]);
  });
});
