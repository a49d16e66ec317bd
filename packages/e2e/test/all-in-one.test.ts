import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Wallet } from 'ethers';
import pg from 'pg';

// `npm start` as a user runs it: the real start script in its own process, driven over HTTP by a real
// wallet. It must come up, serve sign-in and key management, and stop cleanly on SIGTERM.

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

describe('npm start (all-in-one)', () => {
  let child: ChildProcess;
  let base: string;
  let output = '';

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ['scripts/start.mjs'], {
      cwd: repoRoot,
      env: {
        ...process.env,
        HTTP_PORT: String(port),
        PUBLIC_URL: base,
        DATABASE_URL: databaseUrl(databaseName),
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
  });

  it('signs a wallet in and manages its keys over /api', async () => {
    const wallet = Wallet.createRandom();
    const challenge = await fetch(`${base}/api/auth/challenge?address=${wallet.address}`);
    expect(challenge.status).toBe(200);
    const { message } = (await challenge.json()) as { message: string };
    expect(message).toContain(`URI: ${base}`);

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
  });

  it('stops cleanly on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output).not.toMatch(/"level":"(error|fatal)"/);
  }, 30_000);
});
