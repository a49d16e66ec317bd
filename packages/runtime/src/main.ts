import { parseArgs } from 'node:util';
import { ConfigError, createLogger, GracefulShutdown } from '@svc/platform';
import { runTarget, type Target } from './runner.js';

export interface CommandLine {
  readonly target: string | undefined;
  readonly reset: boolean;
}

/** `--target <name>` (also `-target=<name>`, as Loki spells it) and `--reset`. */
export function parseCommandLine(argv: readonly string[]): CommandLine {
  const normalized = argv.map((arg) => (/^-target(=|$)/.test(arg) ? `-${arg}` : arg));
  const { values } = parseArgs({
    args: normalized,
    options: { target: { type: 'string' }, reset: { type: 'boolean', default: false } },
    strict: true,
  });
  return { target: values.target, reset: values.reset ?? false };
}

/**
 * Runs a target as a process's main: starts it, stops it on SIGTERM or SIGINT (exit 0 when clean),
 * and exits 1 with one fatal log line when it cannot start (a configuration error lists every problem).
 */
export async function runMain(target: Target, options: { reset?: boolean } = {}): Promise<void> {
  const shutdown = new GracefulShutdown({ logger: createLogger({ service: target.name }) });
  // Listening before anything starts: a signal during start-up still stops what did start.
  shutdown.listen();
  try {
    const running = await runTarget(target, { reset: options.reset });
    shutdown.add(target.name, () => running.stop());
  } catch (error) {
    const logger = createLogger({ service: target.name });
    if (error instanceof ConfigError) logger.fatal({ problems: error.problems }, error.message);
    else logger.fatal({ err: error }, `${target.name} failed to start`);
    process.exit(1);
  }
}
