import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, sep } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger, type Logger } from '@svc/platform';
import {
  CONSOLE_CONTENT_SECURITY_POLICY,
  CONSOLE_NOT_BUILT,
  consoleDirectory,
} from '../src/http/console-routes.js';
import { startGateway, type RunningGateway } from './support/gateway.js';
import { call } from './support/http.js';
import { startKeyService, type RunningKeyService } from './support/key-service.js';
import { sendRaw, type RawAnswer } from './support/raw-http.js';
import { createTestStore, type TestStore } from './support/test-store.js';

// The web console as the gateway serves it, from a tiny build of our own in a temporary directory: the
// page, its hashed assets, and nothing else of the directory or around it.

const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";
const GATEWAY_CSP = "default-src 'none'; frame-ancestors 'none'";
const IMMUTABLE = 'public, max-age=31536000, immutable';
const PAGE =
  '<!doctype html><title>console</title><script type="module" src="/assets/app-abc123.js"></script>';
const SCRIPT = 'console.log("app");';
const STYLE = 'body { margin: 0; }';
// Markers of files that must never be served; a body holding one leaked it.
const SECRET = 'SECRET-OUTSIDE-THE-BUILD';
const DOTFILE = 'DOTFILE-IN-THE-BUILD';
const OTHER = 'OTHER-FILE-OF-THE-BUILD';

interface LogLine {
  readonly level: number | string;
  readonly msg?: string;
  readonly dir?: string | null;
}

/** An info-level logger whose lines the test reads back. */
function capturingLogger(lines: LogLine[]): Logger {
  const destination = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line.trim() !== '') lines.push(JSON.parse(line) as LogLine);
      done();
    },
  });
  return createLogger({ service: 'gateway-test', level: 'info', destination });
}

let root: string;
let dist: string;
let unbuilt: string;
let redis: TestStore;
let keyService: RunningKeyService;
let gateway: RunningGateway;
let unbuiltGateway: RunningGateway;
let offGateway: RunningGateway;
const unbuiltLog: LogLine[] = [];
const offLog: LogLine[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'gateway-console-'));
  dist = join(root, 'dist');
  unbuilt = join(root, 'unbuilt');
  await mkdir(join(dist, 'assets'), { recursive: true });
  await mkdir(unbuilt);
  await writeFile(join(root, 'package.json'), `{ "name": "${SECRET}" }`);
  await writeFile(join(root, 'secret.txt'), SECRET);
  await writeFile(join(dist, 'index.html'), PAGE);
  await writeFile(join(dist, 'favicon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
  await writeFile(join(dist, 'stats.html'), OTHER);
  await writeFile(join(dist, '.env'), DOTFILE);
  await writeFile(join(dist, 'assets', 'app-abc123.js'), SCRIPT);
  await writeFile(join(dist, 'assets', 'app-abc123.css'), STYLE);
  await writeFile(join(dist, 'assets', '.env'), DOTFILE);

  redis = createTestStore();
  keyService = await startKeyService(redis.open());
  const start = (env: Record<string, string>, logger?: Logger) =>
    startGateway({
      keyServiceAddress: keyService.address,
      store: redis.open(),
      env,
      ...(logger ? { logger } : {}),
    });
  [gateway, unbuiltGateway, offGateway] = await Promise.all([
    start({ CONSOLE_DIR: dist }),
    start({ CONSOLE_DIR: unbuilt }, capturingLogger(unbuiltLog)),
    start({ CONSOLE_DIR: 'off' }, capturingLogger(offLog)),
  ]);
});

afterAll(async () => {
  await Promise.all([gateway?.close(), unbuiltGateway?.close(), offGateway?.close()]);
  await keyService?.close();
  await redis?.cleanup();
  await rm(root, { recursive: true, force: true });
});

function get(path: string, method = 'GET'): Promise<RawAnswer> {
  return sendRaw(gateway.baseUrl, { method, path });
}

/** The headers every response keeps, the console's included. */
function expectGatewayHeaders(answer: RawAnswer): void {
  expect(answer.headers['x-frame-options']).toBe('DENY');
  expect(answer.headers['x-content-type-options']).toBe('nosniff');
  expect(answer.headers['referrer-policy']).toBe('no-referrer');
}

/** A 404 in the `/api` shape that leaked nothing, under the gateway's own policy. */
function expectNotFound(answer: RawAnswer, message: string | RegExp = /^No route /): void {
  expect(answer.status).toBe(404);
  expect(answer.headers['content-type']).toBe('application/json; charset=utf-8');
  expect(answer.headers['content-security-policy']).toBe(GATEWAY_CSP);
  const body = JSON.parse(answer.text) as { error: string; message: string };
  expect(body.error).toBe('not_found');
  expect(body.message).toMatch(message);
  for (const marker of [SECRET, DOTFILE, OTHER, SCRIPT, PAGE]) expect(answer.text).not.toContain(marker);
}

describe('the page', () => {
  it.each(['/', '/index.html', '/?from=wallet'])(
    'GET %s is index.html, revalidated every time, under the console policy',
    async (path) => {
      const answer = await get(path);
      expect(answer.status).toBe(200);
      expect(answer.text).toBe(PAGE);
      expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(answer.headers['cache-control']).toBe('no-cache');
      expect(answer.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expectGatewayHeaders(answer);
    },
  );

  it('HEAD / answers the same headers and no body', async () => {
    const answer = await get('/', 'HEAD');
    expect(answer.status).toBe(200);
    expect(answer.text).toBe('');
    expect(answer.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(answer.headers['content-length']).toBe(String(Buffer.byteLength(PAGE)));
    expect(answer.headers['content-security-policy']).toBe(CONSOLE_CSP);
  });

  it('is the exact policy the module exports', () => {
    expect(CONSOLE_CONTENT_SECURITY_POLICY).toBe(CONSOLE_CSP);
  });

  it.each(['POST', 'PUT', 'DELETE', 'PATCH'])('%s / is a 404 in the /api shape', async (method) => {
    expectNotFound(await get('/', method), `No route ${method} /.`);
  });
});

describe('the assets', () => {
  it.each([
    ['/assets/app-abc123.js', 'text/javascript; charset=utf-8', SCRIPT],
    ['/assets/app-abc123.css', 'text/css; charset=utf-8', STYLE],
  ])('%s is served immutable with its type', async (path, type, content) => {
    for (const method of ['GET', 'HEAD']) {
      const answer = await get(path, method);
      expect(answer.status).toBe(200);
      expect(answer.text).toBe(method === 'GET' ? content : '');
      expect(answer.headers['content-type']).toBe(type);
      expect(answer.headers['cache-control']).toBe(IMMUTABLE);
      expect(answer.headers['content-security-policy']).toBe(CONSOLE_CSP);
      expectGatewayHeaders(answer);
    }
  });

  it('a favicon of the build is served, revalidated', async () => {
    const answer = await get('/favicon.svg');
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toBe('image/svg+xml');
    expect(answer.headers['cache-control']).toBe('no-cache');
    expectNotFound(await get('/favicon.ico'));
  });

  it.each(['/assets/missing.js', '/assets', '/assets/', '/assets/app-abc123.js/x'])(
    '%s is a 404 in the /api shape',
    async (path) => {
      expectNotFound(await get(path));
    },
  );
});

describe('nothing else of the directory, or outside it', () => {
  it.each([
    '/../package.json',
    '/../secret.txt',
    '/%2e%2e/secret.txt',
    '/assets/../index.html',
    '/assets/../../secret.txt',
    '/assets/%2e%2e/index.html',
    '/assets/%2e%2e%2f%2e%2e%2fsecret.txt',
    '/assets/..%2f..%2fpackage.json',
    '/assets/..%5c..%5csecret.txt',
    '/assets//../index.html',
    '/.env',
    '/assets/.env',
    '/assets/%2eenv',
    '/stats.html',
    '/dist/index.html',
    '/index.html/..%2f..%2fsecret.txt',
  ])('%s is not served', async (path) => {
    const answer = await get(path);
    // A path express cannot decode would be a 400; every one here decodes, so it is simply not found.
    expectNotFound(answer, /./);
  });
});

describe('the rest of the gateway', () => {
  it('keeps its own policy on /api, /v1 and the probes', async () => {
    for (const path of ['/api/nowhere', '/api/chain', '/v1/models', '/healthz', '/readyz']) {
      const answer = await call(gateway.baseUrl, 'GET', path);
      expect([path, answer.headers.get('content-security-policy')]).toEqual([path, GATEWAY_CSP]);
      expect(answer.headers.get('content-type')).toBe('application/json; charset=utf-8');
    }
    expect((await call(gateway.baseUrl, 'GET', '/healthz')).body).toEqual({ status: 'ok' });
    expect((await call(gateway.baseUrl, 'GET', '/v1/models')).status).toBe(401);
  });
});

describe('where the build is', () => {
  it('answers 404 saying the console is not built while the directory has no index.html, and serves it once built', async () => {
    expect(unbuiltLog).toContainEqual(
      expect.objectContaining({ msg: 'the web console is not served: no build of it here', dir: unbuilt }),
    );
    for (const path of ['/', '/index.html']) {
      const answer = await sendRaw(unbuiltGateway.baseUrl, { method: 'GET', path });
      expectNotFound(answer, CONSOLE_NOT_BUILT);
      expect(JSON.parse(answer.text)).toEqual({ error: 'not_found', message: CONSOLE_NOT_BUILT });
    }
    // Built after the gateway started: served without a restart.
    await writeFile(join(unbuilt, 'index.html'), PAGE);
    const built = await sendRaw(unbuiltGateway.baseUrl, { method: 'GET', path: '/' });
    expect([built.status, built.text]).toEqual([200, PAGE]);
  });

  it('serves no console at all with CONSOLE_DIR=off', async () => {
    expect(offLog).toContainEqual(
      expect.objectContaining({ msg: 'the web console is off (CONSOLE_DIR=off)' }),
    );
    expectNotFound(await sendRaw(offGateway.baseUrl, { method: 'GET', path: '/' }), 'No route GET /.');
  });

  it('defaults to the dist directory of the @svc/console package, and resolves a relative CONSOLE_DIR', () => {
    expect(consoleDirectory(undefined)).toMatch(new RegExp(`${sep}apps\\${sep}console\\${sep}dist$`));
    expect(consoleDirectory('build/console')).toBe(join(process.cwd(), 'build', 'console'));
  });
});
