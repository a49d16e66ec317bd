import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Wallet, type HDNodeWallet } from 'ethers';
import { isProcessAlive } from '@svc/anvil';
import { freePort } from '@svc/testkit';

// `npm start` as a user runs it: the real start script in its own process, with nothing configured,
// so every dependency is the embedded one (PGlite, memory store, in-process bus, devnet), driven over
// HTTP by a real wallet. Keys and chain state survive a restart; `--reset` clears them.

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));

interface DevnetFile {
  rpcUrl: string;
  chainId: number;
  anvilPid: number;
  contracts: { jobRegistry: string; workerRegistry: string };
  models: Array<{ name: string; feeWei: string }>;
  accounts: Array<{ role: string; address: string }>;
}

async function rpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return ((await response.json()) as { result?: unknown }).result;
}

/** One `npm start` process; `stop` sends SIGTERM and resolves with its exit code. */
class Stack {
  private output = '';
  private constructor(private readonly child: ChildProcess) {
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
  }

  static async start(env: Record<string, string>, args: string[] = []): Promise<Stack> {
    const stack = new Stack(
      spawn(process.execPath, ['scripts/start.mjs', ...args], {
        cwd: repoRoot,
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'info', ...env },
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    );
    const deadline = Date.now() + 90_000;
    while (!stack.output.includes('"msg":"all started"')) {
      if (stack.child.exitCode !== null) throw new Error(`npm start exited early:\n${stack.output}`);
      if (Date.now() > deadline) throw new Error(`npm start did not start in time:\n${stack.output}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return stack;
  }

  get logs(): string {
    return this.output;
  }

  async stop(): Promise<number | null> {
    if (this.child.exitCode !== null) return this.child.exitCode;
    const exited = new Promise<number | null>((resolve) => this.child.once('exit', (code) => resolve(code)));
    this.child.kill('SIGTERM');
    return exited;
  }

  kill(): void {
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

async function signInAndMint(base: string, wallet: HDNodeWallet): Promise<string> {
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
  const mint = await fetch(`${base}/api/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'e2e', spendCapWei: '1000' }),
  });
  expect(mint.status).toBe(201);
  return ((await mint.json()) as { key: string }).key;
}

const modelsStatus = async (base: string, key: string) =>
  (await fetch(`${base}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).status;

describe('npm start (all-in-one, embedded defaults)', () => {
  let stateDir: string;
  let base: string;
  let env: Record<string, string>;
  let stack: Stack | undefined;
  let key: string;
  let firstRun: { devnet: DevnetFile; blockNumber: bigint };

  beforeAll(async () => {
    stateDir = mkdtempSync(join(tmpdir(), 'svc-e2e-state-'));
    const port = await freePort();
    base = `http://localhost:${port}`;
    env = {
      PORT: String(port),
      STATE_DIR: stateDir,
      DEVNET_PORT: '0',
      DEVNET_FILE: join(stateDir, 'devnet.json'),
    };
    stack = await Stack.start(env);
  }, 120_000);

  afterAll(async () => {
    stack?.kill();
    rmSync(stateDir, { recursive: true, force: true });
  });

  it('runs the devnet, the services and two registered workers with nothing configured', async () => {
    const devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
    expect(isProcessAlive(devnet.anvilPid)).toBe(true);
    expect(Number(await rpc(devnet.rpcUrl, 'eth_chainId', []))).toBe(devnet.chainId);
    expect(devnet.models.map((model) => model.name)).toEqual(['llama3.2:1b', 'qwen2.5:0.5b']);
    const workers = devnet.accounts.filter((account) => account.role === 'worker');
    expect(workers).toHaveLength(2);
    for (const worker of workers) {
      // WorkerRegistry.isActive(worker)
      const data = `0x9f8a13d7${worker.address.slice(2).toLowerCase().padStart(64, '0')}`;
      const result = await rpc(devnet.rpcUrl, 'eth_call', [
        { to: devnet.contracts.workerRegistry, data },
        'latest',
      ]);
      expect(BigInt(String(result))).toBe(1n);
    }
    expect(stack!.logs).toContain('using the embedded PostgreSQL (PGlite)');
    expect(existsSync(join(stateDir, 'postgres'))).toBe(true);
    firstRun = { devnet, blockNumber: BigInt(String(await rpc(devnet.rpcUrl, 'eth_blockNumber', []))) };
  });

  it('signs a wallet in, mints a key that works on /v1, and answers completions 503 not_configured', async () => {
    key = await signInAndMint(base, Wallet.createRandom());
    expect(await modelsStatus(base, key)).toBe(200);
    const completion = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'llama3.2:1b', messages: [{ role: 'user', content: 'hi' }] }),
    });
    expect(completion.status).toBe(503);
    expect(((await completion.json()) as { error: { code: string } }).error.code).toBe('not_configured');
  });

  it('stops cleanly on SIGTERM, its devnet with it', async () => {
    expect(await stack!.stop()).toBe(0);
    expect(stack!.logs).not.toMatch(/"level":(50|60)/);
    expect(isProcessAlive(firstRun.devnet.anvilPid)).toBe(false);
    expect(existsSync(join(stateDir, 'devnet.json'))).toBe(false);
  }, 30_000);

  it('keeps keys and chain state across a restart', async () => {
    stack = await Stack.start(env);
    expect(stack.logs).toContain('devnet resumed from its kept state');
    const devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
    expect(devnet.contracts).toEqual(firstRun.devnet.contracts);
    expect(BigInt(String(await rpc(devnet.rpcUrl, 'eth_blockNumber', [])))).toBeGreaterThanOrEqual(
      firstRun.blockNumber,
    );
    expect(await modelsStatus(base, key)).toBe(200);
    expect(await stack.stop()).toBe(0);
  }, 120_000);

  it('starts from scratch with --reset', async () => {
    stack = await Stack.start(env, ['--reset']);
    expect(stack.logs).toContain('state reset: starting from scratch');
    expect(stack.logs).toContain('"msg":"devnet deployed"');
    expect(await modelsStatus(base, key)).toBe(401);
    expect(await stack.stop()).toBe(0);
  }, 120_000);
});
