// `npm start`: runs the all-in-one target (every service, the devnet and the reference workers) in a
// child process and presents it. At a terminal: start-up progress, then a summary with the next commands;
// the JSON logs go to <STATE_DIR>/logs/server.log, warnings and errors (or every line with --logs) are
// shown readable. Elsewhere (CI, a pipe): the JSON log lines pass through to stdout as the server wrote them.
// Ctrl-C (or SIGTERM) stops the server, which stops everything it started.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import ora from 'ora';
import { STACK_FILE_NAME, type StackFile } from '../stack-file-format.js';
import { levelOf, openLogFile, parseLogLine, prettyLogLines } from './log-view.js';
import { StartUpProgress } from './start-up-stages.js';
import { startUpSummary } from './summary.js';

const checkout = fileURLToPath(new URL('../../../../', import.meta.url));
const serverEntry = fileURLToPath(new URL('../main.ts', import.meta.url));
const WARN = 40;

const args = process.argv.slice(2);
const showAllLogs = args.includes('--logs');
const serverArgs = args.filter((arg) => arg !== '--logs');
const interactive = Boolean(process.stdout.isTTY) && !process.env.CI;
// The runner's own default (<checkout>/.dev), set explicitly so the log file sits beside the state it describes.
const stateDir = process.env.STATE_DIR ?? join(checkout, '.dev');
const logPath = join(stateDir, 'logs', 'server.log');
const startedAt = Date.now();

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
  ['--conditions=@svc/source', '--import', 'tsx', serverEntry, '--target', 'all', ...serverArgs],
  { cwd: process.cwd(), env: { ...process.env, STATE_DIR: stateDir }, stdio: ['ignore', 'pipe', 'pipe'] },
);

let up = false;
createInterface({ input: server.stdout! }).on('line', (text) => {
  log.write(`${text}\n`);
  const line = parseLogLine(text);
  if (!interactive) {
    process.stdout.write(`${text}\n`);
    if (line?.msg === 'all started') process.stderr.write(summary());
    return;
  }
  if (!line) return show(text);
  if (showAllLogs || levelOf(line) >= WARN) show(pretty(text));
  for (const stage of progress.advance(line)) {
    spinner.succeed(stage.title);
    if (progress.current) spinner.start(progress.current.title);
  }
  if (line.msg === 'all started') {
    up = true;
    process.stdout.write(summary());
  }
});
createInterface({ input: server.stderr! }).on('line', (text) => {
  log.write(`${text}\n`);
  if (interactive) show(text);
  else process.stderr.write(`${text}\n`);
});

function summary(): string {
  let stack: StackFile;
  try {
    stack = JSON.parse(readFileSync(join(stateDir, STACK_FILE_NAME), 'utf8')) as StackFile;
  } catch {
    return `All started; ${join(stateDir, STACK_FILE_NAME)} says where everything is.\n`;
  }
  const logFile = relative(process.cwd(), logPath) || logPath;
  return startUpSummary(stack, {
    seconds: (Date.now() - startedAt) / 1000,
    logFile: interactive ? logFile : null,
  });
}

// One SIGTERM to the server however the stop was asked for. Ctrl-C also reaches the server itself (same
// process group) as SIGINT; it handles each signal once, so the two make one graceful stop. A third
// signal forces it.
let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.on(signal, () => {
    if (stopping) return;
    stopping = true;
    if (spinner.isSpinning) spinner.stop();
    spinner.start('Stopping');
    server.kill('SIGTERM');
  });

server.on('exit', (code, signal) => {
  log.end();
  const exitCode = code ?? (signal ? 1 : 0);
  if (stopping || up) {
    if (exitCode === 0) spinner.succeed('Stopped; nothing left running');
    else spinner.fail(`Stopped with exit code ${exitCode}; see ${logPath}`);
  } else {
    spinner.fail(
      `${progress.current?.title ?? 'Start-up'}: failed (exit code ${exitCode}); the log is ${logPath}`,
    );
  }
  process.exit(exitCode);
});
