import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';

// A stopping process gives its services SHUTDOWN_TIMEOUT, then exits anyway: below the pod's grace
// period, so it is never killed half way (the chart sets it 5 s below).

const stateDir = mkdtempSync(join(tmpdir(), 'svc-runtime-main-'));
afterAll(() => rmSync(stateDir, { recursive: true, force: true }));

/** Starts the slow-stop process, sends SIGTERM once it started, and returns its exit code. */
async function stopWith(settings: Record<string, string>): Promise<number | null> {
  const child = spawn(
    process.execPath,
    ['--conditions=@svc/source', '--import', 'tsx', 'test/fixtures/slow-stop-main.ts'],
    { env: { ...process.env, STATE_DIR: stateDir, LOG_LEVEL: 'error', ...settings }, stdio: 'pipe' },
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const before = output;
    output += chunk.toString();
    // Once, as the kubelet does (a second signal would end the process at once).
    if (output.includes('started\n') && !before.includes('started\n')) child.kill('SIGTERM');
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  return code;
}

describe('runMain', () => {
  it('waits for services that stop within SHUTDOWN_TIMEOUT, and exits 0', async () => {
    expect(await stopWith({ STOP_MS: '1500', SHUTDOWN_TIMEOUT: '20s' })).toBe(0);
  }, 60_000);

  it('exits 1 once SHUTDOWN_TIMEOUT passed, without waiting for a service still stopping', async () => {
    const started = Date.now();
    expect(await stopWith({ STOP_MS: '60000', SHUTDOWN_TIMEOUT: '1s' })).toBe(1);
    // Start-up (tsx) included; far below the 60 s the service would have taken.
    expect(Date.now() - started).toBeLessThan(30_000);
  }, 60_000);
});
