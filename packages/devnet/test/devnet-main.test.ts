import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { readDevnetDescription, type DevnetDescription } from '../src/index.js';
import { isProcessAlive as isAlive } from '@svc/anvil';

// `npm run devnet` as a person runs it: its own process, up until a signal, then gone with its anvil.

const entry = fileURLToPath(new URL('../src/main.ts', import.meta.url));

async function waitFor<T>(probe: () => T | undefined, child: ChildProcess, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`devnet exited early with ${child.exitCode}`);
    const value = probe();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the devnet did not come up in time');
}

async function runUntilSignal(signal: NodeJS.Signals) {
  const directory = mkdtempSync(join(tmpdir(), 'svc-devnet-cli-'));
  const descriptionPath = join(directory, 'devnet.json');
  const child = spawn(
    process.execPath,
    ['--conditions=@svc/source', '--import', 'tsx', entry, '--port', '0', '--out', descriptionPath],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    const description = await waitFor<DevnetDescription>(
      () => (existsSync(descriptionPath) ? readDevnetDescription(descriptionPath) : undefined),
      child,
      60_000,
    );
    await waitFor(() => (output.includes('Ctrl-C stops it') ? true : undefined), child, 10_000);
    child.kill(signal);
    const code = await exited;
    return { description, descriptionPath, code, output };
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(directory, { recursive: true, force: true });
  }
}

describe('npm run devnet', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    'prints its description path and summary, and on %s exits 0 leaving no anvil or description',
    async (signal) => {
      const { description, descriptionPath, code, output } = await runUntilSignal(signal);
      expect(output.split('\n')[0]).toBe(descriptionPath);
      expect(output).toContain(`devnet up: chain 31337 at ${description.rpcUrl}`);
      expect(output).toContain('llama3.2:1b');
      expect(output).toContain(description.contracts.jobRegistry);
      expect(output).not.toContain(description.accounts[0]!.privateKey);
      expect(code).toBe(0);
      expect(isAlive(description.anvilPid)).toBe(false);
      expect(existsSync(descriptionPath)).toBe(false);
    },
    90_000,
  );

  it('refuses a bad flag with its usage and exit code 2', async () => {
    const child = spawn(
      process.execPath,
      ['--conditions=@svc/source', '--import', 'tsx', entry, '--port', 'x'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('DEVNET_PORT must be an integer from 0 to 65535');
    expect(stderr).toContain('Usage: npm run devnet');
  }, 30_000);
});
