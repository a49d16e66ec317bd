import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, jest } from '@jest/globals';
import { CommandContext } from '../src/context.js';
import { CredentialStore } from '../src/credentials.js';
import { CliError, EXIT } from '../src/errors.js';
import { runCli } from '../src/program.js';
import { freePort } from '@svc/testkit';

// anvil's first two dev accounts: public key pairs.
const DEV_KEY = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';
const DEV_ADDRESS = '0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266';
const OTHER_KEY = '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d';
const OTHER_ADDRESS = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
const HOUR = 3_600_000;

let root: string;
let stateDir: string;
let configDir: string;
let stdout: string;
let stderr: string;

beforeEach(() => {
  root = mkdtempSync(join(tmpdir(), 'svc-program-'));
  stateDir = join(root, 'state');
  configDir = join(root, 'config');
  mkdirSync(stateDir);
  stdout = '';
  stderr = '';
  jest.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => {
    stdout += String(chunk);
    return true;
  });
  jest.spyOn(process.stderr, 'write').mockImplementation((chunk: unknown) => {
    // Node's own process warnings (jest's VM modules are experimental) are not svc's output.
    if (!/^\(node:\d+\) /.test(String(chunk))) stderr += String(chunk);
    return true;
  });
});

afterEach(() => {
  jest.restoreAllMocks();
  rmSync(root, { recursive: true, force: true });
});

/** An environment with nothing of the developer's: no stack.json, no credentials, no SVC_ variables. */
function envWith(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return { STATE_DIR: stateDir, SVC_CONFIG_DIR: configDir, ...extra };
}

function writeStack(gatewayUrl: string): void {
  writeFileSync(
    join(stateDir, 'stack.json'),
    JSON.stringify({
      gatewayUrl,
      rpcUrl: 'http://127.0.0.1:8545',
      chainId: 31337,
      contracts: { jobRegistry: '0x1', workerRegistry: '0x2' },
      delegate: null,
      facilitator: null,
      models: ['demo'],
    }),
  );
}

function signInAt(baseUrl: string, expiresAt = Date.now() + HOUR): void {
  new CredentialStore(envWith()).saveSignIn(baseUrl, {
    address: DEV_ADDRESS,
    token: 'token',
    expiresAt: new Date(expiresAt).toISOString(),
  });
}

function lines(text: string): string[] {
  return text.split('\n').filter(Boolean);
}

describe('runCli: usage', () => {
  it('answers 2 to an unknown command, saying so on stderr', async () => {
    expect(await runCli(['frobnicate'], envWith({ SVC_BASE_URL: 'http://127.0.0.1:1' }))).toBe(EXIT.usage);
    expect(stderr).toMatch(/^svc: unknown command 'frobnicate'/);
    expect(stdout).toBe('');
  });

  it('answers 2 to an unknown option and to a missing argument', async () => {
    expect(await runCli(['keys', 'list', '--frobnicate'], envWith())).toBe(EXIT.usage);
    expect(await runCli(['deposit'], envWith())).toBe(EXIT.usage);
    expect(stderr).toContain("missing required argument 'amount'");
  });

  it('with --json reports a usage error of the command line itself as one JSON document on stdout', async () => {
    expect(await runCli(['--json', 'keys', 'cap', 'only-an-id'], envWith())).toBe(EXIT.usage);
    expect(stderr).toBe('');
    expect(JSON.parse(stdout)).toEqual({
      error: { message: "missing required argument 'amount'", code: 'usage' },
    });
  });

  it('answers 0 to --help, with the exit codes', async () => {
    expect(await runCli(['--help'], envWith())).toBe(EXIT.ok);
    expect(stdout).toContain('Exit codes:');
    expect(stdout).toContain('keys');
  });

  it('answers 2 to an amount that is not one, before anything is sent', async () => {
    const env = envWith({ SVC_BASE_URL: 'http://127.0.0.1:1' });
    expect(await runCli(['deposit', 'lots'], env)).toBe(EXIT.usage);
    expect(lines(stderr)).toEqual([
      'svc: amount "lots" is not an amount: whole wei (1000), or with a unit (0.01ether, 5gwei).',
    ]);
    stderr = '';
    expect(await runCli(['keys', 'create', '--cap', '-1'], env)).toBe(EXIT.usage);
    expect(lines(stderr)).toEqual([expect.stringMatching(/^svc: cap "-1" is not an amount/)]);
    expect(stdout).toBe('');
  });

  it('answers 2 when there is no service to talk to', async () => {
    expect(await runCli(['keys', 'list'], envWith())).toBe(EXIT.usage);
    expect(lines(stderr)).toEqual([
      'svc: no service to talk to: pass --base-url, set SVC_BASE_URL, or run `npm start` here.',
    ]);
  });

  it('answers 2 to a base URL that is not http(s), or a private key that is not one', async () => {
    expect(await runCli(['--base-url', 'ftp://example.com', 'keys', 'list'], envWith())).toBe(EXIT.usage);
    expect(stderr).toContain('base URL "ftp://example.com" is not an http(s) URL');
    const env = envWith({ SVC_BASE_URL: 'http://127.0.0.1:1', SVC_PRIVATE_KEY: 'not a key' });
    expect(await runCli(['keys', 'list'], env)).toBe(EXIT.usage);
    expect(stderr).toContain('SVC_PRIVATE_KEY is not a private key');
  });
});

describe('runCli: credentials', () => {
  it('answers 3 to keys list with no sign-in: one line on stderr naming svc login', async () => {
    const env = envWith({ SVC_BASE_URL: 'http://127.0.0.1:1' });
    expect(await runCli(['keys', 'list'], env)).toBe(EXIT.credentials);
    expect(stdout).toBe('');
    expect(lines(stderr)).toHaveLength(1);
    expect(stderr).toMatch(
      /^svc: unauthorized: .*not signed in at http:\/\/127\.0\.0\.1:1\. Run: svc login\n$/,
    );
  });

  it("uses the sign-in of SVC_PRIVATE_KEY's wallet, not another wallet's", async () => {
    const baseUrl = 'http://127.0.0.1:1';
    signInAt(baseUrl);
    const env = envWith({ SVC_BASE_URL: baseUrl, SVC_PRIVATE_KEY: OTHER_KEY });
    expect(await runCli(['keys', 'list'], env)).toBe(EXIT.credentials);
    expect(lines(stderr)).toEqual([
      `svc: unauthorized: ${OTHER_ADDRESS} is not signed in at ${baseUrl}. Run: svc login`,
    ]);
  });

  it('says when the sign-in lapsed', async () => {
    const baseUrl = 'http://127.0.0.1:1';
    const expiresAt = Date.now() - HOUR;
    signInAt(baseUrl, expiresAt);
    expect(await runCli(['keys', 'list'], envWith({ SVC_BASE_URL: baseUrl }))).toBe(EXIT.credentials);
    expect(lines(stderr)).toEqual([
      `svc: unauthorized: the sign-in of ${DEV_ADDRESS} at ${baseUrl} expired at ${new Date(expiresAt).toISOString()}. Run: svc login`,
    ]);
  });

  it('with --json prints the error as one JSON document on stdout, and nothing on stderr', async () => {
    const env = envWith({ SVC_BASE_URL: 'http://127.0.0.1:1' });
    expect(await runCli(['--json', 'keys', 'list'], env)).toBe(EXIT.credentials);
    expect(stderr).toBe('');
    expect(JSON.parse(stdout)).toEqual({
      error: {
        message: expect.stringContaining('not signed in at http://127.0.0.1:1'),
        code: 'unauthorized',
        command: 'svc login',
      },
    });
  });
});

describe('runCli: the network', () => {
  it('answers 1 when nothing listens at the base URL', async () => {
    const baseUrl = `http://127.0.0.1:${await freePort()}`;
    signInAt(baseUrl);
    expect(await runCli(['keys', 'list'], envWith({ SVC_BASE_URL: baseUrl }))).toBe(EXIT.failed);
    expect(lines(stderr)).toEqual([expect.stringMatching(new RegExp(`^svc: cannot reach ${baseUrl} \\(`))]);
    expect(stdout).toBe('');
  });

  it("talks to npm start's gateway when no base URL is given", async () => {
    const baseUrl = `http://127.0.0.1:${await freePort()}`;
    writeStack(`${baseUrl}/`);
    signInAt(baseUrl);
    expect(await runCli(['--json', 'keys', 'list'], envWith())).toBe(EXIT.failed);
    const { error } = JSON.parse(stdout) as { error: { message: string; remedy: string } };
    expect(error.message).toMatch(new RegExp(`^cannot reach ${baseUrl} \\(`));
    expect(error.remedy).toContain('--base-url');
  });
});

describe('CommandContext', () => {
  const contextOf = (options: { baseUrl?: string; rpcUrl?: string }, extra: NodeJS.ProcessEnv = {}) =>
    CommandContext.create(options, envWith(extra));

  it('takes --base-url, else SVC_BASE_URL, else the stack.json gateway, without a trailing slash', () => {
    writeStack('http://127.0.0.1:7000/');
    expect(contextOf({}).baseUrl).toBe('http://127.0.0.1:7000');
    expect(contextOf({}, { SVC_BASE_URL: 'https://svc.example/' }).baseUrl).toBe('https://svc.example');
    expect(
      contextOf({ baseUrl: 'http://localhost:9000//' }, { SVC_BASE_URL: 'https://svc.example' }).baseUrl,
    ).toBe('http://localhost:9000');
  });

  it("reads the chain from --rpc-url, else SVC_RPC_URL, else the stack's when it is the service talked to", () => {
    writeStack('http://127.0.0.1:7000');
    expect(contextOf({}).rpcUrl()).toBe('http://127.0.0.1:8545');
    expect(contextOf({}, { SVC_RPC_URL: 'http://chain:8545' }).rpcUrl()).toBe('http://chain:8545');
    expect(contextOf({ rpcUrl: 'http://flag:8545' }, { SVC_RPC_URL: 'http://chain:8545' }).rpcUrl()).toBe(
      'http://flag:8545',
    );
    const elsewhere = contextOf({ baseUrl: 'https://svc.example' });
    expect(elsewhere.stack).toBeUndefined();
    expect(() => elsewhere.rpcUrl()).toThrow(CliError);
    expect(() => elsewhere.rpcUrl()).toThrow(/--rpc-url/);
  });

  it('names the wallet of SVC_PRIVATE_KEY, with or without 0x', () => {
    expect(contextOf({ baseUrl: 'http://x' }).namedWallet).toBeUndefined();
    expect(contextOf({ baseUrl: 'http://x' }, { SVC_PRIVATE_KEY: DEV_KEY }).namedWallet).toBe(DEV_ADDRESS);
    expect(contextOf({ baseUrl: 'http://x' }, { SVC_PRIVATE_KEY: DEV_KEY.slice(2) }).namedWallet).toBe(
      DEV_ADDRESS,
    );
  });
});
