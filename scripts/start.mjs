// `npm start`: runs the all-in-one mode from TypeScript sources in one process (no build step).
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const entry = fileURLToPath(new URL('../apps/server/src/main.ts', import.meta.url));
const child = spawn(
  process.execPath,
  ['--conditions=@svc/source', '--import', 'tsx', entry, ...process.argv.slice(2)],
  {
    stdio: 'inherit',
  },
);
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
