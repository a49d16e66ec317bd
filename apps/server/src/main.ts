// The runner: `svc-server --target <all|key-service|job-orchestrator|payment-settler|gateway|worker>
// [--reset]`. `npm start` runs `--target all`; a container runs one service. `--reset` empties STATE_DIR
// first (the embedded database, the devnet chain and the workers' data), to start from scratch.
// `--target migrate` applies the key-service's database migrations and exits (the chart's migration Job).
import { parseCommandLine, runMain } from '@svc/runtime';
import { MIGRATE_TARGET, runMigrations } from './migrate.js';
import { targets } from './targets.js';

const USAGE = `Usage: svc-server [--target <${[...Object.keys(targets), MIGRATE_TARGET].join('|')}>] [--reset]\n`;

let commandLine;
try {
  commandLine = parseCommandLine(process.argv.slice(2));
} catch (error) {
  process.stderr.write(`${(error as Error).message}\n${USAGE}`);
  process.exit(2);
}
if (commandLine.target === MIGRATE_TARGET) process.exit(await runMigrations());
const target = targets[commandLine.target ?? 'all'];
if (!target) {
  process.stderr.write(`unknown target "${commandLine.target}"\n${USAGE}`);
  process.exit(2);
}
await runMain(target, { reset: commandLine.reset });
// Start-up leaves garbage that an idle server keeps for hours, nothing allocating enough to collect it (on
// a first start, the embedded database's initialization alone leaves ~400 MB): collected now, and once more
// when what runs on just after start-up (the devnet's KZG warm-up, the workers' first rounds) is done,
// when the process was given `--expose-gc` (`npm start` does).
const collect = (globalThis as { gc?: () => void }).gc;
if (collect) {
  collect();
  setTimeout(collect, 10_000).unref();
}
