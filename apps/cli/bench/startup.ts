// How long `svc` takes, run by its path as a developer runs it: `svc --help` (nothing but the
// program), and `svc keys list` against a running `npm start` (sign-in read, one HTTP call, a table).
// Medians of N runs each, against the targets of issue 26 (0.3 s and 0.8 s).
//
//   npm run bench -w @svc/cli [-- --runs 20] [-- --source]
//
// `keys list` uses the `npm start` whose stack.json is at STATE_DIR (default .dev) when one runs; else
// the bench starts one itself (`node scripts/start.mjs`, as the e2e suites do) with a temporary state
// directory and a free port, and stops it with SIGINT at the end. The wallet is the stack's demo wallet,
// signed in once before timing into a temporary SVC_CONFIG_DIR. `--source` also times the same commands
// from the TypeScript sources (tsx), as svc ran before it was compiled.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_STATE_DIR } from '@svc/runtime/state-dir';
import type { StackFile } from '@svc/server/stack-file-format';
// The port helper alone: the testkit's index loads jest's globals, which a script outside jest cannot.
import { freePort } from '@svc/testkit/ports';

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '15' }, source: { type: 'boolean', default: false } },
});
const runs = Number(values.runs);
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const svcBin = join(repoRoot, 'node_modules', '.bin', 'svc');
const TARGETS = { help: 0.3, keysList: 0.8 };

/** Runs a command once from a directory outside the checkout; its wall time in seconds, from spawn to exit. */
function timeOnce(command: string, args: string[], env: NodeJS.ProcessEnv): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command, args, { cwd: tmpdir(), env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve(seconds);
      else reject(new Error(`${command} ${args.join(' ')} exited ${code}: ${stderr}`));
    });
  });
}

async function median(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  times: number,
): Promise<number> {
  await timeOnce(command, args, env); // a first run warms the file cache and builds dist if it is stale
  const samples: number[] = [];
  for (let i = 0; i < times; i++) samples.push(await timeOnce(command, args, env));
  samples.sort((a, b) => a - b);
  const middle = Math.floor(samples.length / 2);
  return samples.length % 2 ? samples[middle]! : (samples[middle - 1]! + samples[middle]!) / 2;
}

/** The running `npm start` of STATE_DIR, or one started here; `stop` ends only what this bench started. */
async function stack(): Promise<{ stateDir: string; file: StackFile; stop: () => Promise<void> }> {
  const running = process.env.STATE_DIR ?? DEFAULT_STATE_DIR;
  const stackFile = join(running, 'stack.json');
  if (existsSync(stackFile)) {
    const file = JSON.parse(readFileSync(stackFile, 'utf8')) as StackFile;
    const answered = await fetch(`${file.gatewayUrl}/v1/models`).then(
      () => true,
      () => false,
    );
    if (answered) {
      console.log(`keys list: against the npm start at ${file.gatewayUrl} (${stackFile})`);
      return { stateDir: running, file, stop: async () => {} };
    }
  }
  const stateDir = mkdtempSync(join(tmpdir(), 'svc-cli-bench-'));
  const port = await freePort();
  console.log(`keys list: no npm start is running; starting one on port ${port} (state in ${stateDir})`);
  const child: ChildProcess = spawn(process.execPath, ['scripts/start.mjs'], {
    cwd: repoRoot,
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      LOG_LEVEL: 'info',
      PORT: String(port),
      STATE_DIR: stateDir,
      DEVNET_PORT: '0',
      DEVNET_FILE: join(stateDir, 'devnet.json'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 120_000;
  while (!output.includes('"msg":"all started"')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`npm start did not start:\n${output.slice(-4000)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const file = JSON.parse(readFileSync(join(stateDir, 'stack.json'), 'utf8')) as StackFile;
  return {
    stateDir,
    file,
    stop: async () => {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}

function report(name: string, seconds: number, target: number): void {
  const verdict = seconds <= target ? 'within' : 'OVER';
  console.log(
    `${name.padEnd(34)} median ${seconds.toFixed(3)} s   target ${target} s   ` +
      `ratio ${(seconds / target).toFixed(2)} (${verdict})`,
  );
}

const configDir = mkdtempSync(join(tmpdir(), 'svc-cli-bench-config-'));
const baseEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', SVC_CONFIG_DIR: configDir };
// svc from its TypeScript sources, as bin/svc.js ran it before it was compiled.
const fromSource = [
  '--conditions=@svc/source',
  '--import',
  import.meta.resolve('tsx'),
  join(repoRoot, 'apps/cli/src/main.ts'),
];
console.log(`svc: ${svcBin}, ${runs} runs each after one warm-up, from ${tmpdir()}`);

const results: Array<[string, number, number]> = [];
/** Times one command and says at once how it went. */
async function measure(
  name: string,
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  target: number,
) {
  const seconds = await median(command, args, env, runs);
  results.push([name, seconds, target]);
  report(name, seconds, target);
}

await measure('svc --help', svcBin, ['--help'], baseEnv, TARGETS.help);
if (values.source)
  await measure(
    'svc --help (from sources, tsx)',
    process.execPath,
    [...fromSource, '--help'],
    baseEnv,
    TARGETS.help,
  );

const running = await stack();
try {
  const env = {
    ...baseEnv,
    STATE_DIR: running.stateDir,
    SVC_PRIVATE_KEY: running.file.demoWallet?.privateKey ?? running.file.accounts[0]!.privateKey,
  };
  const login = spawnSync(svcBin, ['login', '--json'], { cwd: tmpdir(), env, encoding: 'utf8' });
  if (login.status !== 0) throw new Error(`svc login exited ${login.status}: ${login.stdout}${login.stderr}`);
  await measure('svc keys list', svcBin, ['keys', 'list'], env, TARGETS.keysList);
  if (values.source)
    await measure(
      'svc keys list (from sources, tsx)',
      process.execPath,
      [...fromSource, 'keys', 'list'],
      env,
      TARGETS.keysList,
    );
} finally {
  await running.stop();
  rmSync(configDir, { recursive: true, force: true });
}

console.log('\nmedians (ratio = median / target; at most 1 meets the target):');
for (const result of results) report(...result);
process.exitCode = results.every(
  ([name, seconds, target]) => name.includes('from sources') || seconds <= target,
)
  ? 0
  : 1;
