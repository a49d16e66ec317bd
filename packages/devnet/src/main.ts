// `npm run devnet`: a local chain for development, up until Ctrl-C or SIGTERM. Prints where its
// description is (the JSON other processes read, e.g. `RPC_URL=… npm start`) and a short summary.
import { parseArgs } from 'node:util';
import { isProcessAlive } from '@svc/anvil';
import { ConfigError, GracefulShutdown, loadConfig } from '@svc/platform';
import { devnetConfigShape, humanSummary, resolveDevnetFile, startDevnet } from './index.js';

const USAGE = `Usage: npm run devnet -- [--port <n>] [--block-time <seconds>] [--out <file>]

  -p, --port        port of the JSON-RPC endpoint; 0 picks a free one   (env DEVNET_PORT, default 8545)
  -b, --block-time  seconds between blocks; 0 mines one per transaction (env DEVNET_BLOCK_TIME, default 0)
  -o, --out         where to write the devnet description JSON          (env DEVNET_FILE, default .dev/devnet.json)
`;

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

function readOptions() {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        port: { type: 'string', short: 'p' },
        'block-time': { type: 'string', short: 'b' },
        out: { type: 'string', short: 'o' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    });
  } catch (error) {
    fail(`${(error as Error).message}\n\n${USAGE}`);
  }
  if (parsed.values.help) {
    process.stdout.write(USAGE);
    process.exit(0);
  }
  // Flags win over the environment; both go through the same validation.
  const source = {
    ...process.env,
    ...(parsed.values.port !== undefined && { DEVNET_PORT: parsed.values.port }),
    ...(parsed.values['block-time'] !== undefined && { DEVNET_BLOCK_TIME: parsed.values['block-time'] }),
    ...(parsed.values.out !== undefined && { DEVNET_FILE: parsed.values.out }),
  };
  try {
    return loadConfig(devnetConfigShape, source);
  } catch (error) {
    if (error instanceof ConfigError) fail(`${error.message}\n\n${USAGE}`);
    throw error;
  }
}

const ANVIL_CHECK_INTERVAL_MS = 2_000;

const config = readOptions();
// Listening before anything starts: a signal during start-up still exits through the closers (and
// the launcher's exit hook stops an anvil that was half started).
const shutdown = new GracefulShutdown();
shutdown.listen();
const devnet = await startDevnet({
  port: config.DEVNET_PORT,
  blockTimeSeconds: config.DEVNET_BLOCK_TIME || undefined,
  descriptionPath: resolveDevnetFile(config.DEVNET_FILE),
}).catch((error: unknown) => fail(`the devnet did not start: ${String(error)}`));
shutdown.add('devnet', () => devnet.stop());

// Also what keeps this process alive: the launcher does not hold the event loop open for anvil.
const anvilCheck = setInterval(() => {
  if (isProcessAlive(devnet.description.anvilPid) || shutdown.isShuttingDown) return;
  process.stderr.write('anvil exited unexpectedly; the devnet is gone\n');
  void shutdown.shutdown('anvil exited').then(() => process.exit(1));
}, ANVIL_CHECK_INTERVAL_MS);
shutdown.add('anvil check', () => clearInterval(anvilCheck));

process.stdout.write(`${devnet.descriptionPath}\n`);
process.stdout.write(`${humanSummary(devnet.description, devnet.descriptionPath).join('\n')}\n`);
process.stdout.write('Ctrl-C stops it.\n');
