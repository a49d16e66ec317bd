// `svc-server --target migrate`: applies the key-service's database migrations to DATABASE_URL and exits,
// as the Helm chart's pre-install/pre-upgrade Job runs it (the key-service pods then start with
// RUN_MIGRATIONS=false). The migrations are the SQL files the key-service ships, applied by its own
// runner under the advisory lock `prisma migrate deploy` takes, so a key-service replica that migrates
// at start and this command exclude each other.
import { applyMigrations } from '@svc/key-service';
import { ConfigError, createLogger, loadConfig } from '@svc/platform';
import { runtimeConfigShape } from '@svc/runtime';

/** The name `--target` takes for this one-shot command (it is not a service). */
export const MIGRATE_TARGET = 'migrate';

/** Applies pending migrations; resolves to the process's exit code (0 when the database is current). */
export async function runMigrations(env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let runtime;
  try {
    runtime = loadConfig(runtimeConfigShape, env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    createLogger({ service: MIGRATE_TARGET }).fatal({ problems: error.problems }, error.message);
    return 1;
  }
  const logger = createLogger({ service: MIGRATE_TARGET, level: runtime.LOG_LEVEL });
  if (!runtime.DATABASE_URL) {
    logger.fatal('DATABASE_URL is required: the migrations run against a PostgreSQL server');
    return 1;
  }
  try {
    const report = await applyMigrations(runtime.DATABASE_URL);
    logger.info(report, 'database migrations applied');
    return 0;
  } catch (error) {
    logger.fatal({ err: error }, 'database migrations failed');
    return 1;
  }
}
