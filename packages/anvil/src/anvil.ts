import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Wallet } from 'ethers';
import { resolveAnvilBinary } from './anvil-binary.js';
import { sendWithBlobs } from './blobs.js';
import { createDevProvider } from './dev-provider.js';

export interface AnvilOptions {
  /** TCP port; a free one is picked when omitted. */
  port?: number;
  host?: string;
  /** Seconds between blocks; omitted means a block per transaction (automine). */
  blockTime?: number;
  chainId?: number;
  /** Number of funded dev accounts (default 10). */
  accounts?: number;
  /** Balance of each dev account in ether (default anvil's 10,000). */
  balanceEther?: number;
  /** EVM hardfork, e.g. `cancun` or `prague`; anvil's latest when omitted. */
  hardfork?: string;
  /**
   * Seconds between consecutive block timestamps, instead of wall-clock time. With it a pending
   * call (gas estimate, simulation) sees exactly the timestamp its transaction will be mined at,
   * so deadline tests are exact and gas estimates match execution.
   */
  blockTimestampInterval?: number;
  /** Sends one blob transaction before returning: anvil loads its KZG setup on the first (~3.5 s). */
  warmBlobs?: boolean;
  /** Limit on how long anvil may take to answer (default 30 s). */
  startupTimeoutMs?: number;
  /**
   * A file that keeps the chain across runs: loaded at start when it exists, written when anvil stops
   * and every few seconds meanwhile (so a killed process loses little).
   */
  statePath?: string;
}

export interface AnvilAccount {
  address: string;
  privateKey: string;
}

export interface AnvilInstance {
  rpcUrl: string;
  chainId: number;
  accounts: AnvilAccount[];
  pid: number;
  /** Stops anvil and waits for it to exit; safe to call more than once. */
  stop(): Promise<void>;
}

interface AnvilConfigOut {
  available_accounts: string[];
  private_keys: string[];
}

const DEFAULT_CHAIN_ID = 31337;
const OUTPUT_TAIL_CHARS = 4_000;
const STOP_GRACE_MS = 5_000;
const STATE_DUMP_INTERVAL_SECONDS = 5;

/** Children still running, killed synchronously if this process exits without stopping them. */
const running = new Set<ChildProcess>();
function killRunningOnExit(): void {
  for (const child of running) child.kill('SIGKILL');
}

/** Starts a fresh anvil and resolves once it answers JSON-RPC. */
export async function startAnvil(options: AnvilOptions = {}): Promise<AnvilInstance> {
  const chainId = options.chainId ?? DEFAULT_CHAIN_ID;
  const workDir = mkdtempSync(join(tmpdir(), 'svc-anvil-'));
  const configOut = join(workDir, 'anvil.json');
  const child = spawn(resolveAnvilBinary(), anvilArguments(options, chainId, configOut), {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  track(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const stop = once(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(killer);
    }
    untrack(child);
    rmSync(workDir, { recursive: true, force: true });
  });

  try {
    const address = await waitForListening(child, options.startupTimeoutMs ?? 30_000);
    const rpcUrl = `http://${address}`;
    await waitForRpc(rpcUrl, chainId);
    if (options.blockTimestampInterval !== undefined) {
      await rpc(rpcUrl, 'anvil_setBlockTimestampInterval', [options.blockTimestampInterval]);
    }
    const accounts = readAccounts(configOut);
    const instance: AnvilInstance = { rpcUrl, chainId, accounts, pid: child.pid ?? -1, stop };
    if (options.warmBlobs) await warmBlobs(instance);
    return instance;
  } catch (error) {
    await stop();
    throw error;
  }
}

function anvilArguments(options: AnvilOptions, chainId: number, configOut: string): string[] {
  const args = ['--host', options.host ?? '127.0.0.1', '--port', String(options.port ?? 0)];
  args.push('--chain-id', String(chainId), '--config-out', configOut);
  if (options.accounts !== undefined) args.push('--accounts', String(options.accounts));
  if (options.balanceEther !== undefined) args.push('--balance', String(options.balanceEther));
  if (options.blockTime !== undefined) args.push('--block-time', String(options.blockTime));
  if (options.hardfork !== undefined) args.push('--hardfork', options.hardfork);
  if (options.statePath !== undefined)
    args.push('--state', options.statePath, '--state-interval', String(STATE_DUMP_INTERVAL_SECONDS));
  return args;
}

/** Anvil prints `Listening on host:port` once bound; with port 0 that is how the port is learned. */
function waitForListening(child: ChildProcess, timeoutMs: number): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output = (output + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS);
      const match = /Listening on (\S+:\d+)/.exec(output);
      if (match?.[1]) settle(() => resolve(match[1] as string));
    };
    const onExit = (code: number | null, signal: string | null) =>
      settle(() => reject(new Error(`anvil exited before listening (${signal ?? code}):\n${output}`)));
    const onError = (error: Error) => settle(() => reject(error));
    const timer = setTimeout(
      () => settle(() => reject(new Error(`anvil did not listen within ${timeoutMs} ms:\n${output}`))),
      timeoutMs,
    );
    function settle(finish: () => void): void {
      clearTimeout(timer);
      child.stdout?.off('data', onData);
      child.stderr?.off('data', onData);
      child.off('exit', onExit);
      child.off('error', onError);
      // Keep draining the pipes so a chatty anvil never blocks on a full buffer.
      child.stdout?.resume();
      child.stderr?.resume();
      finish();
    }
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

async function waitForRpc(rpcUrl: string, expectedChainId: number): Promise<void> {
  const chainId = await rpc(rpcUrl, 'eth_chainId', []);
  if (typeof chainId !== 'string' || Number(BigInt(chainId)) !== expectedChainId) {
    throw new Error(`anvil at ${rpcUrl} answered eth_chainId with ${JSON.stringify(chainId)}`);
  }
}

async function rpc(rpcUrl: string, method: string, params: unknown[]): Promise<unknown> {
  const response = await fetch(rpcUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message?: string } };
  if (body.error)
    throw new Error(`anvil ${method} failed: ${body.error.message ?? JSON.stringify(body.error)}`);
  return body.result;
}

function readAccounts(configOut: string): AnvilAccount[] {
  const config = JSON.parse(readFileSync(configOut, 'utf8')) as AnvilConfigOut;
  return config.available_accounts.map((address, index) => {
    const privateKey = config.private_keys[index];
    if (privateKey === undefined) throw new Error(`anvil: no private key for account ${index}`);
    return { address: new Wallet(privateKey).address, privateKey };
  });
}

/** The last dev account sends itself one blob, so later blob transactions take milliseconds. */
async function warmBlobs(instance: AnvilInstance): Promise<void> {
  const account = instance.accounts.at(-1);
  if (!account) throw new Error('anvil: warmBlobs needs at least one account');
  const provider = createDevProvider(instance.rpcUrl, instance.chainId);
  try {
    const wallet = new Wallet(account.privateKey, provider);
    const response = await sendWithBlobs(wallet, { to: wallet.address }, 1);
    await response.wait();
  } finally {
    provider.destroy();
  }
}

function track(child: ChildProcess): void {
  if (running.size === 0) process.on('exit', killRunningOnExit);
  running.add(child);
  // A test run that forgets stop() still ends; the exit hook then kills anvil.
  child.unref();
  for (const stream of [child.stdout, child.stderr]) (stream as { unref?: () => void } | null)?.unref?.();
}

function untrack(child: ChildProcess): void {
  running.delete(child);
  if (running.size === 0) process.off('exit', killRunningOnExit);
}

function once(action: () => Promise<void>): () => Promise<void> {
  let result: Promise<void> | undefined;
  return () => (result ??= action());
}
