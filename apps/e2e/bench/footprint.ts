// The footprint of `npm start` on this machine: start-up time (a fresh devnet, then a resumed one), and
// the resident memory of each of its processes idle and under concurrent streamed completions.
//
//   npm run bench -w @svc/e2e [-- --streams 20 --capacity 10]
//
// `--capacity` sets the reference workers' CAPACITY (jobs at once; `npm start` gives each 16): with
// fewer slots than streams the extra jobs are failed by the worker and retried elsewhere, which is
// measured too (answered, and the status of the rest).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { execFileSync } from 'node:child_process';
import { Wallet } from 'ethers';
// The port helper alone: the testkit's index loads jest's globals, which a script outside jest cannot.
import { freePort } from '@svc/testkit/ports';
import { mintKey, signIn, Stack, type DevnetFile, type StackFile } from '../test/support/stack.js';

const { values } = parseArgs({
  options: { streams: { type: 'string', default: '20' }, capacity: { type: 'string' } },
});
const streams = Number(values.streams);
const KEY_CONCURRENCY = 4; // V1_KEY_CONCURRENCY_LIMIT's default: one key per 4 streams.

const stateDir = mkdtempSync(join(tmpdir(), 'svc-footprint-'));
const port = await freePort();
const base = `http://localhost:${port}`;
const env = {
  PORT: String(port),
  STATE_DIR: stateDir,
  DEVNET_PORT: '0',
  DEVNET_FILE: join(stateDir, 'devnet.json'),
  ...(values.capacity ? { CAPACITY: values.capacity } : {}),
  // One fresh wallet opens a session per stream at once: room for it beyond the defaults that stop wallets
  // which never pay from opening sessions (docs/architecture.md, Sessions nobody pays for).
  SESSION_OPENS_UNPAID_PER_MINUTE: String(Math.max(10, streams)),
  SESSION_UNUSED_PER_WALLET: String(Math.max(8, streams)),
  // The embedded PostgreSQL (PGlite) is most of the server's memory; DATABASE_URL compares without it.
  ...(process.env.DATABASE_URL ? { DATABASE_URL: process.env.DATABASE_URL } : {}),
};

/** Resident set size of a process, in MiB, from /proc. */
function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+([0-9]+) kB/.exec(status)![1]) / 1024;
}
/** The launcher, the server it runs, and anvil. */
function processes(stack: Stack): Record<string, number> {
  const server = Number(
    execFileSync('pgrep', ['-P', String(stack.pid)], { encoding: 'utf8' })
      .trim()
      .split('\n')[0],
  );
  const devnet = JSON.parse(readFileSync(join(stateDir, 'devnet.json'), 'utf8')) as DevnetFile;
  return { launcher: stack.pid, server, anvil: devnet.anvilPid };
}
const sample = (pids: Record<string, number>) =>
  Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, rssMiB(pid)]));

/** One streamed completion over plain fetch: time to the first chunk and to [DONE], or the status. */
async function stream(
  key: string,
  content: string,
): Promise<{ status: number; firstMs: number; totalMs: number }> {
  const started = performance.now();
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'llama3.2:1b', stream: true, messages: [{ role: 'user', content }] }),
  });
  let firstMs = 0;
  if (response.status === 200) {
    const reader = response.body!.getReader();
    for (;;) {
      const { done } = await reader.read();
      firstMs ||= performance.now() - started;
      if (done) break;
    }
  } else await response.text();
  return { status: response.status, firstMs, totalMs: performance.now() - started };
}

let t0 = performance.now();
let stack = await Stack.start(env);
const freshStartMs = performance.now() - t0;
try {
  const pids = processes(stack);
  await new Promise((resolve) => setTimeout(resolve, 5_000));
  const idle = sample(pids);

  const stackFile = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
  const demo = new Wallet(stackFile.demoWallet!.privateKey);
  const { token } = await signIn(base, demo);
  const keys = await Promise.all(
    Array.from({ length: Math.ceil(streams / KEY_CONCURRENCY) }, () => mintKey(base, token, {})),
  );
  // A message of ~100 words: the deterministic model echoes it at 50 tokens a second (~2-3 s a stream).
  const words = Array.from({ length: 100 }, (_, index) => `word${index}`).join(' ');
  const peak: Record<string, number> = { ...idle };
  const sampler = setInterval(() => {
    for (const [name, value] of Object.entries(sample(pids))) peak[name] = Math.max(peak[name]!, value);
  }, 100);
  t0 = performance.now();
  const results = await Promise.all(
    Array.from({ length: streams }, (_, index) => stream(keys[index % keys.length]!, `${index} ${words}`)),
  );
  const wallMs = performance.now() - t0;
  clearInterval(sampler);
  const answered = results.filter((result) => result.status === 200);
  const statuses = results.map((result) => result.status).sort();
  const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;

  console.log(
    `npm start, ${streams} concurrent streams, worker CAPACITY ${values.capacity ?? 'as npm start sets it'} (2 workers), database: ${env.DATABASE_URL ? 'DATABASE_URL' : 'embedded PGlite'}`,
  );
  console.log(`start-up (fresh devnet, to "all started"):  ${(freshStartMs / 1000).toFixed(1)} s`);
  console.log('resident memory (MiB):      idle     under streams (peak)');
  for (const name of Object.keys(pids))
    console.log(
      `  ${name.padEnd(24)} ${idle[name]!.toFixed(0).padStart(6)}   ${peak[name]!.toFixed(0).padStart(6)}`,
    );
  const total = (values: Record<string, number>) => Object.values(values).reduce((a, b) => a + b, 0);
  console.log(
    `  ${'total'.padEnd(24)} ${total(idle).toFixed(0).padStart(6)}   ${total(peak).toFixed(0).padStart(6)}`,
  );
  console.log(
    `streams answered: ${answered.length}/${streams} (statuses ${[...new Set(statuses)].join(', ')})`,
  );
  console.log(
    `first chunk median ${median(answered.map((r) => r.firstMs)).toFixed(0)} ms, whole stream median ${median(answered.map((r) => r.totalMs)).toFixed(0)} ms, all ${streams} in ${(wallMs / 1000).toFixed(1)} s`,
  );

  await stack.stop();
  t0 = performance.now();
  stack = await Stack.start(env);
  console.log(
    `start-up (resumed devnet):                  ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
} finally {
  await stack.stop();
  rmSync(stateDir, { recursive: true, force: true });
}
