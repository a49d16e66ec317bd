// `npm run bench:start`: how quick and how light `npm start` is, from one run, each figure beside its
// target (issue #26.4). Runs `npm start` itself (its prestart included) with a fresh STATE_DIR and ports of
// its own, so a running `npm start` of the checkout is left alone:
//
//   1. first start: a fresh STATE_DIR (a new embedded database, devnet deployment and worker data), with
//      what `npm install` leaves in a clean clone: turbo's cache of the generated code (postinstall) and
//      the compiled server (apps/server's prepare). With --after-install both are removed first and made
//      again by the same steps `npm install` runs (timed apart, as part of the install), so nothing an
//      earlier `npm start` of this checkout made is reused.
//   2. idle resident memory: after the summary and IDLE seconds (default 15), the VmRSS of every process
//      of the tree `npm start` runs (npm, the launcher, the server, anvil), summed; sampled three times,
//      the largest kept.
//   3. later start: Ctrl-C (SIGINT to the process group, as a terminal sends it), then `npm start` again on
//      the same STATE_DIR.
//
//   node scripts/bench-start.mjs [--after-install] [--idle <seconds>] [--json]
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clearTimeout, setTimeout } from 'node:timers';
import { parseArgs } from 'node:util';

const root = fileURLToPath(new URL('..', import.meta.url));
const TARGETS = { firstStartSeconds: 20, laterStartSeconds: 10, idleRssMb: 500 };

const { values } = parseArgs({
  options: {
    'after-install': { type: 'boolean', default: false },
    idle: { type: 'string', default: '15' },
    json: { type: 'boolean', default: false },
  },
});
const idleSeconds = Number(values.idle);

const stateDir = mkdtempSync(join(tmpdir(), 'svc-bench-start-'));
const env = {
  ...process.env,
  STATE_DIR: stateDir,
  PORT: String(await freePort()),
  DEVNET_PORT: String(await freePort()),
  LOG_LEVEL: 'info',
};
delete env.CI;

const results = {};
try {
  if (values['after-install']) {
    rmSync(join(root, '.turbo', 'cache'), { recursive: true, force: true });
    rmSync(join(root, 'apps', 'server', 'dist', 'start'), { recursive: true, force: true });
    const started = Date.now();
    for (const step of [
      ['scripts/generate.mjs', '--at-install'],
      ['apps/server/scripts/bundle.mjs', '--at-install'],
    ]) {
      const run = spawnSync(process.execPath, step, {
        cwd: root,
        env,
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      if (run.status !== 0) throw new Error(`${step.join(' ')} failed`);
    }
    results.installStepSeconds = (Date.now() - started) / 1000;
  }
  const first = await startNpm();
  results.firstStartSeconds = first.seconds;
  results.firstStartNotices = first.notices;
  results.firstStartRunnerSeconds = first.runnerSeconds;
  await sleep(idleSeconds * 1000);
  const samples = [];
  for (let i = 0; i < 3; i += 1) {
    samples.push(treeRss(first.child.pid));
    await sleep(1000);
  }
  const largest = samples.reduce((a, b) => (a.totalKb >= b.totalKb ? a : b));
  results.idleRssMb = Math.round(largest.totalKb / 1024);
  results.idleRssByProcess = largest.processes.map((p) => ({ ...p, rssMb: Math.round(p.rssKb / 1024) }));
  await interrupt(first.child);
  const later = await startNpm();
  results.laterStartSeconds = later.seconds;
  results.laterStartRunnerSeconds = later.runnerSeconds;
  await sleep(idleSeconds * 1000);
  results.laterIdleRssMb = Math.round(treeRss(later.child.pid).totalKb / 1024);
  await interrupt(later.child);
} finally {
  rmSync(stateDir, { recursive: true, force: true });
}

if (values.json) {
  process.stdout.write(`${JSON.stringify(results, null, 2)}\n`);
} else {
  const row = (label, value, unit, target) =>
    `  ${label.padEnd(34)} ${String(value).padStart(7)} ${unit.padEnd(3)} target <= ${target} ${unit}  ${
      value <= target ? 'ok' : 'OVER'
    }`;
  const lines = ['', 'npm start, measured in one run on this machine:', ''];
  if (results.installStepSeconds !== undefined)
    lines.push(
      `  ${'its install steps (npm install)'.padEnd(34)} ${String(results.installStepSeconds).padStart(7)} s   (generate, bundle)`,
    );
  lines.push(
    row('first start, to its summary', results.firstStartSeconds, 's', TARGETS.firstStartSeconds),
    `    of which the server's runner (devnet, database, services, workers): ${results.firstStartRunnerSeconds} s`,
    row('later start, to its summary', results.laterStartSeconds, 's', TARGETS.laterStartSeconds),
    `    of which the server's runner: ${results.laterStartRunnerSeconds} s`,
    row('idle RSS of the whole tree', results.idleRssMb, 'MB', TARGETS.idleRssMb),
    row('the same after the later start', results.laterIdleRssMb, 'MB', TARGETS.idleRssMb),
    '',
    ...results.idleRssByProcess.map((p) => `    ${String(p.rssMb).padStart(5)} MB  ${p.pid}  ${p.command}`),
    `  (load average when done: ${loadavg()
      .map((x) => x.toFixed(1))
      .join(' ')} on ${cpus().length} cores)`,
    '',
    results.firstStartNotices.length
      ? `  output of the first start before its summary that is no log line (tool notices?):\n${results.firstStartNotices.map((l) => `    ${l}`).join('\n')}`
      : '  no tool notices in the first start (every line before the summary was a log line)',
    '',
  );
  process.stdout.write(lines.join('\n'));
}

/** Runs `npm start` in a process group of its own; resolves once its summary is out. */
async function startNpm() {
  const started = Date.now();
  const child = spawn('npm', ['start'], {
    cwd: root,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk) => (stdout += chunk));
  child.stderr.on('data', (chunk) => (stderr += chunk));
  // Not at a terminal, the launcher writes the summary to stderr once the server logged "all started".
  while (!/svc is up|All started/.test(stderr)) {
    if (child.exitCode !== null) throw new Error(`npm start exited early:\n${stdout}\n${stderr}`);
    if (Date.now() - started > 180_000) {
      process.kill(-child.pid, 'SIGKILL');
      throw new Error(`npm start did not start in 180 s:\n${stdout}\n${stderr}`);
    }
    await sleep(20);
  }
  const seconds = Math.round((Date.now() - started) / 100) / 10;
  // The server's runner reports how long its own start took (devnet, database, services, workers).
  const runnerMs = Number(
    /"msg":"all started"/.test(stdout) ? /"ms":(\d+)[^\n]*"msg":"all started"/.exec(stdout)?.[1] : NaN,
  );
  const before = stderr.slice(0, stderr.search(/svc is up|All started/));
  // npm's own `> svc@… start` banner lines and JSON log lines are expected; anything else is a notice.
  const notices = [...before.split('\n'), ...stdout.split('\n')]
    .map((line) => line.trim())
    .filter((line) => line && !line.startsWith('{') && !/^> /.test(line));
  return { child, seconds, notices, runnerSeconds: Math.round(runnerMs / 100) / 10 };
}

async function interrupt(child) {
  const exited = new Promise((resolve) => child.once('exit', resolve));
  process.kill(-child.pid, 'SIGINT');
  const timer = setTimeout(() => process.kill(-child.pid, 'SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
  // The server and anvil may outlive npm by a moment: wait for the process group to be gone.
  for (let i = 0; i < 100 && groupAlive(child.pid); i += 1) await sleep(100);
}

function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

/** VmRSS of `pid` and every process below it, from /proc. */
function treeRss(pid) {
  const children = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (!children.has(ppid)) children.set(ppid, []);
      children.get(ppid).push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  const processes = [];
  const queue = [pid];
  while (queue.length) {
    const current = queue.shift();
    queue.push(...(children.get(current) ?? []));
    try {
      const status = readFileSync(`/proc/${current}/status`, 'utf8');
      const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
      const command = readFileSync(`/proc/${current}/cmdline`, 'utf8').split('\0').join(' ').trim();
      processes.push({
        pid: current,
        rssKb,
        command: command.length > 110 ? `${command.slice(0, 107)}...` : command,
      });
    } catch {
      // Gone meanwhile.
    }
  }
  return { totalKb: processes.reduce((sum, p) => sum + p.rssKb, 0), processes };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
