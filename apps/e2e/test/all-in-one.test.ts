import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Wallet } from 'ethers';
import { isProcessAlive } from '@svc/anvil';
import { freePort, waitUntil } from '@svc/testkit';
import { mintKey, repoRoot, rpc, signIn, Stack, type DevnetFile, type StackFile } from './support/stack.js';

// `npm start` as a user runs it: the real start script in its own process, with nothing configured,
// so every dependency is the embedded one (PGlite, memory store, in-process bus, devnet). Keys and chain
// state survive a restart; `--reset` clears them. The API itself is walked in walk.test.ts.

/** The command lines of running processes that mention `text` (a state directory, say). */
function processesMentioning(text: string): string[] {
  try {
    return execFileSync('pgrep', ['-fa', text], { encoding: 'utf8' }).split('\n').filter(Boolean);
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}

/** Runs `scripts/start.mjs` with only `env` (and PATH, HOME) to its exit: for starts that must fail. */
function runToExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['scripts/start.mjs'], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('close', (code) => resolve({ code, output }));
  });
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

  it('refuses a second npm start on the same state while the first runs, leaving the first and its log alone', async () => {
    const logBefore = readFileSync(join(stateDir, 'logs', 'server.log'), 'utf8');
    const second = await runToExit({ ...env, PORT: String(await freePort()) });
    expect(second.code).toBe(1);
    expect(second.output).toContain(
      `Another npm start already runs with ${stateDir} (its gateway answers at ${base})`,
    );
    expect(readFileSync(join(stateDir, 'logs', 'server.log'), 'utf8').startsWith(logBefore)).toBe(true);
    expect(existsSync(join(stateDir, 'logs', 'server.previous.log'))).toBe(false);
    expect(stack!.running).toBe(true);
  });

  it('exits 1 naming the setting when the configuration is wrong, and leaves nothing running', async () => {
    const otherState = mkdtempSync(join(tmpdir(), 'svc-e2e-state-'));
    try {
      const failed = await runToExit({ STATE_DIR: otherState, PORT: 'eighty', DEVNET_PORT: '0' });
      expect(failed.code).toBe(1);
      const fatal = failed.output
        .split('\n')
        .filter((line) => line.includes('"level":"fatal"'))
        .map((line) => JSON.parse(line) as { problems?: string[] });
      // Only the setting that is wrong: nothing derived from it fails in its place.
      expect(fatal).toEqual([
        expect.objectContaining({
          problems: ['gateway: PORT must be an integer from 0 to 65535 (got "eighty")'],
        }),
      ]);
      // Its devnet (started before the services' configuration is read) was stopped with it.
      expect(existsSync(join(otherState, 'stack.json'))).toBe(false);
      expect(existsSync(join(otherState, 'devnet.json'))).toBe(false);
      expect(processesMentioning(otherState)).toEqual([]);
      expect(readFileSync(join(otherState, 'logs', 'server.log'), 'utf8')).toMatch(/"level":"fatal".*PORT/);
    } finally {
      rmSync(otherState, { recursive: true, force: true });
    }
  });

  it('binds sign-in to its own URL and mints a key that works on /v1', async () => {
    const wallet = Wallet.createRandom();
    const { message, address, token } = await signIn(base, wallet);
    expect(message).toContain(`URI: ${base}`);
    expect(address).toBe(wallet.address);
    key = await mintKey(base, token, { name: 'e2e', spendCapWei: '1000' });
    expect(await modelsStatus(base, key)).toBe(200);
  });

  it('writes stack.json with the gateway, the chain, the delegate and wallets without a delegate', () => {
    const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
    const devnet = firstRun.devnet;
    const signer = devnet.accounts.find((account) => account.role === 'service-signer')!;
    expect(stackFile).toEqual({
      gatewayUrl: base,
      rpcUrl: devnet.rpcUrl,
      chainId: devnet.chainId,
      contracts: {
        jobRegistry: devnet.contracts.jobRegistry,
        workerRegistry: devnet.contracts.workerRegistry,
      },
      delegate: signer.address,
      facilitator: devnet.accounts.find((account) => account.role === 'facilitator')!.address,
      models: ['llama3.2:1b', 'qwen2.5:0.5b'],
      accounts: expect.any(Array),
      demoWallet: expect.any(Object),
    });
    // User wallets 2 and 3 have no delegate; wallet 1, the demo wallet, has deposited and authorized the
    // signer already.
    const wallets = devnet.accounts.filter((account) => account.role === 'wallet');
    expect(stackFile.accounts.map((account) => account.address)).toEqual(
      wallets.slice(1).map((account) => account.address),
    );
    expect(stackFile.demoWallet!.address).toBe(wallets[0]!.address);
    for (const account of [...stackFile.accounts, stackFile.demoWallet!])
      expect(new Wallet(account.privateKey).address).toBe(account.address);
  });

  it('prints the start-up summary with the next commands, keeps stdout JSON, and writes the log to STATE_DIR/logs', async () => {
    const demo = (JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile).demoWallet!;
    // Not a terminal: the JSON log lines pass through on stdout; the summary follows on stderr.
    await waitUntil(
      () => stack!.logs,
      (logs) => logs.includes('Ctrl-C stops everything.'),
      { what: 'the start-up summary' },
    );
    expect(stack!.logs).toMatch(/svc is up \(started in [0-9.]+ s\)/);
    expect(stack!.logs).toContain(`API          ${base}/v1`);
    expect(stack!.logs).toContain('Models       llama3.2:1b, qwen2.5:0.5b');
    expect(stack!.logs).toContain(`export SVC_PRIVATE_KEY=${demo.privateKey}`);
    expect(stack!.logs).toContain(`alias svc=${join(repoRoot, 'node_modules', '.bin', 'svc')}`);
    for (const command of [
      'svc login && svc keys create --name demo --save',
      'svc chat "Hello"',
      'svc pay "Hello"',
    ])
      expect(stack!.logs).toContain(command);
    const stdoutLines = stack!.stdout.trimEnd().split('\n');
    expect(stdoutLines.every((line) => line.startsWith('{'))).toBe(true);
    const logged = readFileSync(join(stateDir, 'logs', 'server.log'), 'utf8');
    expect(logged).toContain('"msg":"all started"');
    expect(logged.trimEnd().split('\n').length).toBeGreaterThanOrEqual(stdoutLines.length);
  });

  it('stops cleanly on SIGTERM, its devnet with it', async () => {
    expect(await stack!.stop()).toBe(0);
    expect(stack!.logs).not.toMatch(/"level":"(error|fatal)"/);
    expect(isProcessAlive(firstRun.devnet.anvilPid)).toBe(false);
    expect(existsSync(join(stateDir, 'devnet.json'))).toBe(false);
  }, 30_000);

  it('keeps keys and chain state across a restart; Ctrl-C on npm start stops it gracefully', async () => {
    stack = await Stack.start(env, [], { viaNpm: true });
    expect(stack.logs).toContain('devnet resumed from its kept state');
    const devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
    expect(devnet.contracts).toEqual(firstRun.devnet.contracts);
    expect(BigInt(String(await rpc(devnet.rpcUrl, 'eth_blockNumber', [])))).toBeGreaterThanOrEqual(
      firstRun.blockNumber,
    );
    expect(await modelsStatus(base, key)).toBe(200);
    // npm passes the terminal's SIGINT on to the launcher, which the terminal sent it too: one stop, clean.
    expect(await stack.interrupt()).toBe(0);
    expect(stack.logs).toContain('"clean":true,"msg":"shutdown complete"');
    expect(processesMentioning(stateDir)).toEqual([]);
  }, 120_000);

  it('starts from scratch with --reset', async () => {
    stack = await Stack.start(env, ['--reset']);
    expect(stack.logs).toContain('state reset: starting from scratch');
    expect(stack.logs).toContain('"msg":"devnet deployed"');
    expect(await modelsStatus(base, key)).toBe(401);
    // The reset spares the logs: this run's log is being written, the restart's is kept beside it.
    expect(readFileSync(join(stateDir, 'logs', 'server.log'), 'utf8')).toContain(
      'state reset: starting from scratch',
    );
    expect(readFileSync(join(stateDir, 'logs', 'server.previous.log'), 'utf8')).toContain(
      'devnet resumed from its kept state',
    );
    expect(await stack.stop()).toBe(0);
  }, 120_000);
});
