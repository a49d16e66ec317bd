// `npm start`: runs the all-in-one target (every service, the devnet and the reference workers) in a
// child process and presents it. At a terminal: start-up progress, then a summary with the next commands;
// the JSON logs go to <STATE_DIR>/logs/server.log, warnings and errors (or every line with --logs) are
// shown readable. Elsewhere (CI, a pipe): the JSON log lines pass through to stdout as the server wrote them.
//
// The server runs in a process group of its own, so a Ctrl-C reaches the launcher only: the launcher
// asks the server to stop once (SIGTERM), and a second Ctrl-C kills the whole group at once.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { isAbsolute, join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import ora from 'ora';
import { STACK_FILE_NAME, type StackFile } from '../stack-file-format.js';
import { levelOf, openLogFile, parseLogLine, prettyLogLines } from './log-view.js';
import { runningStackAt } from './running-stack.js';
import { StartUpProgress } from './start-up-stages.js';
import { startUpSummary } from './summary.js';

const checkout = fileURLToPath(new URL('../../../../', import.meta.url));
// Compiled (scripts/start.mjs runs dist/start/launcher/launch.js, apps/server/scripts/bundle.mjs puts
// main.js beside it) the server runs as JavaScript; from source, under tsx. `import.meta.filename` is where
// this module runs from (the bundle rewrites `import.meta.url` to the source's location).
const compiled = import.meta.filename.endsWith('.js');
const serverEntry = join(import.meta.dirname, compiled ? '../main.js' : '../main.ts');
const WARN = 40;
/**
 * A developer keeps `npm start` running all day, so the idle server is kept small (measured, resident
 * memory: ~30 MB less for each of the first two, ~20 to 40 MB for the third): V8's young generation capped
 * at 2 MB semi-spaces (it grows to 16 MB during start-up and keeps it); glibc's malloc held to two arenas
 * instead of eight per core (the gRPC, PGlite and libuv threads each got one); and blocks of 128 KiB and
 * more mapped on their own, so that freeing them returns them (by default the threshold rises to 32 MiB
 * once the embedded database frees its first large blocks, and what start-up freed stays resident). The
 * environment still wins for the MALLOC_ settings. `--expose-gc`: main.ts collects the start-up's garbage.
 * `--liftoff-only`: WebAssembly (PGlite's PostgreSQL, Prisma's query compiler) stays on V8's baseline
 * compiler; optimizing PostgreSQL's hot functions cost ~50 MB and CPU that a local database never earned
 * back (measured: PGlite opens in 0.35 s instead of 0.6 s and runs 4,000 small queries in 1.2 s instead of
 * 2.4 s).
 */
const SERVER_NODE_OPTIONS: readonly string[] = ['--max-semi-space-size=2', '--expose-gc', '--liftoff-only'];
const SERVER_ENV = {
  MALLOC_ARENA_MAX: '2',
  MALLOC_MMAP_THRESHOLD_: '131072',
  MALLOC_TRIM_THRESHOLD_: '131072',
};

const args = process.argv.slice(2);
const showAllLogs = args.includes('--logs');
const serverArgs = args.filter((arg) => arg !== '--logs');
// A terminal with no size (some ptys) cannot host a spinner: treated as no terminal.
const interactive = Boolean(process.stdout.isTTY && process.stdout.columns) && !process.env.CI;
// The runner's default (`@svc/runtime/state-dir`, which this launcher cannot import: it runs without the
// workspace's source condition), set explicitly for the server so the log sits beside the state it describes.
const stateDir = process.env.STATE_DIR ?? join(checkout, '.dev');
const stackPath = join(stateDir, STACK_FILE_NAME);
const logPath = join(stateDir, 'logs', 'server.log');
const startedAt = Date.now();

// Another `npm start` on this state would fail on its ports, and its log must not be rotated away.
const running = await runningStackAt(stackPath);
if (running) {
  process.stderr.write(
    `Another npm start already runs with ${stateDir} (its gateway answers at ${running}). Stop it first, or give this one its own STATE_DIR and PORT.\n`,
  );
  process.exit(1);
}

const spinner = ora({ stream: process.stderr, isSilent: !interactive });
const pretty = prettyLogLines(Boolean(process.stderr.isTTY));
/** Writes a line above the spinner. */
const show = (text: string) => {
  spinner.clear();
  process.stderr.write(text.endsWith('\n') ? text : `${text}\n`);
  if (spinner.isSpinning) spinner.render();
};

const log = openLogFile(logPath);
const progress = new StartUpProgress();
spinner.start(progress.current?.title);
const server = spawn(
  process.execPath,
  [
    ...SERVER_NODE_OPTIONS,
    // tsx by its location: a bare `--import tsx` would resolve from the working directory.
    ...(compiled ? [] : ['--conditions=@svc/source', '--import', import.meta.resolve('tsx')]),
    serverEntry,
    '--target',
    'all',
    ...serverArgs,
  ],
  {
    cwd: process.cwd(),
    env: { ...SERVER_ENV, ...process.env, STATE_DIR: stateDir },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  },
);

// Every line goes to the log file; the streams are piped, so a slow reader slows the server's output
// instead of filling the launcher's memory.
server.stdout!.pipe(log, { end: false });
server.stderr!.pipe(log, { end: false });
if (!interactive) {
  server.stdout!.pipe(process.stdout);
  server.stderr!.pipe(process.stderr);
}
// Whoever reads our output went away (`npm start | head`): stop the server rather than leave it running.
for (const stream of [process.stdout, process.stderr])
  stream.on('error', () => {
    if (stopRequests === 0) stop();
  });

let up = false;
createInterface({ input: server.stdout! }).on('line', (text) => {
  const line = parseLogLine(text);
  if (line?.msg === 'all started') up = true;
  if (!interactive) {
    if (line?.msg === 'all started') process.stderr.write(summary());
    return;
  }
  if (!line) return show(text);
  if (showAllLogs || levelOf(line) >= WARN) show(pretty(text));
  for (const stage of progress.advance(line)) {
    spinner.succeed(stage.title);
    if (progress.current) spinner.start(progress.current.title);
  }
  if (line.msg === 'all started') process.stdout.write(summary());
});
if (interactive) createInterface({ input: server.stderr! }).on('line', show);

function summary(): string {
  let stack: StackFile;
  try {
    stack = JSON.parse(readFileSync(stackPath, 'utf8')) as StackFile;
  } catch {
    return `All started; ${stackPath} says where everything is.\n`;
  }
  const fromHere = relative(process.cwd(), logPath);
  const logFile = fromHere && !fromHere.startsWith('..') && !isAbsolute(fromHere) ? fromHere : logPath;
  return startUpSummary(stack, {
    seconds: (Date.now() - startedAt) / 1000,
    logFile: interactive ? logFile : null,
    cli: join(checkout, 'node_modules', '.bin', 'svc'),
  });
}

// The first stop request asks the server to stop gracefully; a later one kills its process group
// (anvil included) and removes what the server would have removed. Requests within a second of the first
// are the same request: `npm start` passes the terminal's Ctrl-C on to us, which the terminal sent us too.
const SAME_REQUEST_MS = 1_000;
let stopRequests = 0;
let firstStopAt = 0;
function stop(): void {
  if (server.exitCode !== null || server.signalCode !== null) return;
  if (stopRequests > 0 && Date.now() - firstStopAt < SAME_REQUEST_MS) return;
  stopRequests += 1;
  if (stopRequests === 1) {
    firstStopAt = Date.now();
    if (spinner.isSpinning) spinner.stop();
    spinner.start('Stopping (Ctrl-C again to kill it now)');
    server.kill('SIGTERM');
    return;
  }
  spinner.text = 'Killing';
  try {
    process.kill(-server.pid!, 'SIGKILL');
  } catch {
    // Gone already.
  }
  rmSync(stackPath, { force: true });
}
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, stop);

// 'close' comes once the server's output is drained; the log is flushed before exiting.
server.on('close', (code, signal) => {
  const exitCode = code ?? (signal ? 1 : 0);
  if (stopRequests > 0) {
    if (exitCode === 0) spinner.succeed('Stopped; nothing left running');
    else spinner.fail(`Stopped (exit code ${exitCode}); the log is ${logPath}`);
  } else if (up) {
    spinner.fail(`The server stopped unexpectedly (exit code ${exitCode}); the log is ${logPath}`);
  } else {
    spinner.fail(
      `${progress.current?.title ?? 'Start-up'}: failed (exit code ${exitCode}); the log is ${logPath}`,
    );
  }
  log.end(() => process.exit(exitCode));
});
