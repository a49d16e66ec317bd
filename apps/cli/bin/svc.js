#!/usr/bin/env node
// `svc`: runs the command from its TypeScript sources (no build step), with the workspace's packages
// resolved to their sources. That takes `--conditions=@svc/source`, which only a new process can be
// given, hence the second node (npm start's launcher needs no condition and registers tsx in-process).
// Signals reach the command; its exit code is ours.
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../src/main.ts', import.meta.url));
// tsx by its location, not by name: a bare `--import tsx` resolves from the working directory, and svc
// runs from any directory.
const tsx = import.meta.resolve('tsx');
const child = spawn(
  process.execPath,
  ['--conditions=@svc/source', '--import', tsx, entry, ...process.argv.slice(2)],
  { stdio: 'inherit' },
);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal === 'SIGINT' ? 130 : 1)));
