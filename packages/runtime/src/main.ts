import { parseArgs } from 'node:util';
import { ConfigError, createLogger, GracefulShutdown, loadConfig } from '@svc/platform';
import { runtimeConfigShape } from './config.js';
import type { ServiceModule } from './module.js';
import { runTarget, serviceTarget, type Target } from './runner.js';

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
 * Given a module, runs that service alone (`serviceTarget`): a service's own `src/main.ts`.
 */
export async function runMain(
  what: Target | ServiceModule,
  options: { reset?: boolean } = {},
): Promise<void> {
  const target = 'modules' in what ? what : serviceTarget(what);
  try {
    const shutdown = new GracefulShutdown({
      logger: createLogger({ service: target.name }),
      timeoutMs: shutdownTimeoutMs(target),
    });
    // Listening before anything starts (a module may start before runTarget returns), and the closer
    // added in the same tick, before any signal can be handled: a signal during start-up waits for the
    // start, then stops what started (a failed start closes what it opened itself).
    shutdown.listen();
    const starting = runTarget(target, { reset: options.reset });
    shutdown.add(target.name, async () => (await starting.catch(() => undefined))?.stop());
    await starting;
  } catch (error) {
    const logger = createLogger({ service: target.name });
    if (error instanceof ConfigError) logger.fatal({ problems: error.problems }, error.message);
    else logger.fatal({ err: error }, `${target.name} failed to start`);
    process.exit(1);
  }
}

/** SHUTDOWN_TIMEOUT, read before the target starts (a signal may come during start-up). */
function shutdownTimeoutMs(target: Target): number {
  const env = { ...target.defaults, ...process.env };
  const setting = { SHUTDOWN_TIMEOUT: runtimeConfigShape.SHUTDOWN_TIMEOUT };
  return loadConfig(setting, { SHUTDOWN_TIMEOUT: env.SHUTDOWN_TIMEOUT || undefined }).SHUTDOWN_TIMEOUT;
}
