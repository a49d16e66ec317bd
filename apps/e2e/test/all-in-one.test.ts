import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Wallet } from 'ethers';
import pg from 'pg';
import { isProcessAlive as isAlive } from '@svc/anvil';

// `npm start` as a user runs it: the real start script in its own process, driven over HTTP by a real
// wallet. It must come up with its devnet, serve sign-in and key management bound to the devnet's
// chain, and stop cleanly on SIGTERM, taking its anvil with it.

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const serverUrl = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';
const databaseName = `e2e_${randomBytes(6).toString('hex')}`;

function databaseUrl(name: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function waitForReady(base: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`npm start exited early with ${child.exitCode}`);
    try {
      if ((await fetch(`${base}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error('npm start did not become ready in time');
}

interface DevnetFile {
  rpcUrl: string;
  chainId: number;
  anvilPid: number;
  contracts: { jobRegistry: string };
  models: Array<{ name: string; feeWei: string }>;
}

async function rpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await response.json()) as { result?: unknown }).result;
}

describe('npm start (all-in-one)', () => {
  let child: ChildProcess;
  let base: string;
  let output = '';
  let devnetDirectory: string;
  let devnetFile: string;

  beforeAll(async () => {
    devnetDirectory = mkdtempSync(join(tmpdir(), 'svc-e2e-devnet-'));
    devnetFile = join(devnetDirectory, 'devnet.json');
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['scripts/start.mjs'], {
      cwd: repoRoot,
      env: {
        ...process.env,
        HTTP_PORT: String(port),
        PUBLIC_URL: base,
        DATABASE_URL: databaseUrl(databaseName),
        DEVNET_FILE: devnetFile,
        DEVNET_PORT: '0',
        RPC_URL: '',
        CHAIN_ID: '',
        LOG_LEVEL: 'warn',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitForReady(base, child, 60_000);
  }, 90_000);

  afterAll(async () => {
    if (child.exitCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    const admin = new pg.Client({ connectionString: databaseUrl('postgres') });
    await admin.connect();
    await admin.query(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    await admin.end();
    rmSync(devnetDirectory, { recursive: true, force: true });
  });

  it('runs a devnet with the contracts deployed and describes it in DEVNET_FILE', async () => {
    const devnet = JSON.parse(readFileSync(devnetFile, 'utf8')) as DevnetFile;
    expect(isAlive(devnet.anvilPid)).toBe(true);
    expect(Number(await rpc(devnet.rpcUrl, 'eth_chainId', []))).toBe(devnet.chainId);
    expect(await rpc(devnet.rpcUrl, 'eth_getCode', [devnet.contracts.jobRegistry, 'latest'])).toMatch(
      /^0x[0-9a-f]{100,}$/,
    );
    expect(devnet.models.map((model) => model.name)).toEqual(['llama3.2:1b', 'qwen2.5:0.5b']);
  });

  it('signs a wallet in and manages its keys over /api', async () => {
    const wallet = Wallet.createRandom();
    const challenge = await fetch(`${base}/api/auth/challenge?address=${wallet.address}`);
    expect(challenge.status).toBe(200);
    const { message } = (await challenge.json()) as { message: string };
    expect(message).toContain(`URI: ${base}`);
    const { chainId } = JSON.parse(readFileSync(devnetFile, 'utf8')) as DevnetFile;
    expect(message).toContain(`Chain ID: ${chainId}`);

    const verify = await fetch(`${base}/api/auth/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ message, signature: await wallet.signMessage(message) }),
    });
    expect(verify.status).toBe(200);
    const { token } = (await verify.json()) as { token: string };

    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const mint = await fetch(`${base}/api/api-keys`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ name: 'e2e', spendCapWei: '1000' }),
    });
    expect(mint.status).toBe(201);
    const minted = (await mint.json()) as { id: string; key: string; prefix: string };
    expect(minted.key.startsWith(minted.prefix)).toBe(true);

    const list = await fetch(`${base}/api/api-keys`, { headers: auth });
    const keys = (await list.json()) as Array<Record<string, unknown>>;
    expect(keys.map((key) => key.id)).toEqual([minted.id]);
    expect(JSON.stringify(keys)).not.toContain(minted.key);

    // The key works on /v1, but nothing runs completions yet (no orchestrator or worker).
    const completion = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${minted.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama3.2:1b', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(completion.status).toBe(503);
    expect(((await completion.json()) as { error: { code: string } }).error.code).toBe('not_configured');
  });

  it('stops cleanly on SIGTERM, its devnet with it', async () => {
    const { anvilPid } = JSON.parse(readFileSync(devnetFile, 'utf8')) as DevnetFile;
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output).not.toMatch(/"level":"(error|fatal)"/);
    expect(isAlive(anvilPid)).toBe(false);
    expect(existsSync(devnetFile)).toBe(false);
  }, 30_000);
});
