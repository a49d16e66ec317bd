// turbo's `generate` task for every package (the Prisma client, the console's build, the committed protobuf
// code and contract artifacts), quietly: turbo's banner, summary and notices are shown only when a task
// fails, and its telemetry is off. `npm install` runs it (postinstall), which fills turbo's cache, and
// `npm start` runs it first (prestart): from then on a generator runs again only when one of its inputs
// changed (turbo hashes them), and with nothing changed it takes about half a second.
//
//   node scripts/generate.mjs [--at-install]
//
// At install a generator that fails (a checkout mid-edit) must not fail `npm install`: it says so, and
// `npm start` or `npm run generate` runs it again and fails then.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const atInstall = process.argv.includes('--at-install');

const turbo = fileURLToPath(new URL('../node_modules/.bin/turbo', import.meta.url));
const result = spawnSync(turbo, ['run', 'generate', '--output-logs=errors-only'], {
  cwd: root,
  // Else turbo's telemetry notice would open the first run.
  env: { ...process.env, TURBO_TELEMETRY_DISABLED: '1', DO_NOT_TRACK: '1' },
  encoding: 'utf8',
  shell: process.platform === 'win32',
});
if (result.status !== 0) {
  process.stderr.write(result.stdout ?? '');
  process.stderr.write(result.stderr ?? '');
  if (result.error) process.stderr.write(`${result.error.message}\n`);
  if (atInstall) {
    process.stderr.write(
      'npm install: generating code failed (above); `npm start` and `npm run generate` try again\n',
    );
  } else {
    process.exit(result.status ?? 1);
  }
}
