import { createHash, randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DatabaseConnection } from '@svc/runtime';
import pg from 'pg';

/** This package's migrations, next to the schema (the same path from src/ and from dist/). */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../prisma/migrations', import.meta.url));

/** The advisory lock `prisma migrate deploy` takes, so our runner and Prisma's exclude each other too. */
const MIGRATION_LOCK_KEY = 72707369;

/** Prisma's bookkeeping table, created exactly as Prisma creates it. */
const CREATE_MIGRATIONS_TABLE = `
CREATE TABLE IF NOT EXISTS "_prisma_migrations" (
    "id"                    VARCHAR(36) PRIMARY KEY NOT NULL,
    "checksum"              VARCHAR(64) NOT NULL,
    "finished_at"           TIMESTAMPTZ,
    "migration_name"        VARCHAR(255) NOT NULL,
    "logs"                  TEXT,
    "rolled_back_at"        TIMESTAMPTZ,
    "started_at"            TIMESTAMPTZ NOT NULL DEFAULT now(),
    "applied_steps_count"   INTEGER NOT NULL DEFAULT 0
)`;

export interface MigrationReport {
  /** Migrations applied by this call, in order. */
  readonly applied: string[];
  /** Migrations found already applied. */
  readonly alreadyApplied: string[];
}

export class MigrationError extends Error {
  override readonly name = 'MigrationError';
}

interface Migration {
  readonly name: string;
  readonly sql: string;
  readonly checksum: string;
}

interface AppliedRow {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

/**
 * Applies pending migrations (`<dir>/<timestamp>_<name>/migration.sql`, in name order), each in its own
 * transaction, recording them in `_prisma_migrations` the way `prisma migrate deploy` does. A session-level
 * advisory lock makes replicas that start together apply each migration once; the later ones wait, then
 * find nothing to do. An applied migration whose file changed since is refused, as Prisma refuses it.
 */
export async function applyMigrations(
  database: string | DatabaseConnection,
  migrationsDir: string = MIGRATIONS_DIR,
): Promise<MigrationReport> {
  const migrations = await readMigrations(migrationsDir);
  const client = await openSession(database);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
    try {
      await client.query(CREATE_MIGRATIONS_TABLE);
      const applied = await appliedMigrations(client);
      const report: MigrationReport = { applied: [], alreadyApplied: [] };
      for (const migration of migrations) {
        const row = applied.get(migration.name);
        if (row) {
          if (row.checksum !== migration.checksum) {
            throw new MigrationError(`migration ${migration.name} was edited after it was applied`);
          }
          report.alreadyApplied.push(migration.name);
          continue;
        }
        await applyOne(client, migration);
        report.applied.push(migration.name);
      }
      return report;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
    }
  } finally {
    await client.close();
  }
}

/** One connection that runs SQL scripts and parameterized statements. */
interface SqlSession {
  query<R>(sql: string, params?: unknown[]): Promise<{ rows: R[] }>;
  /** Runs a script of several statements. */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

async function openSession(database: string | DatabaseConnection): Promise<SqlSession> {
  if (typeof database !== 'string' && database.kind === 'embedded') {
    const { pglite } = database;
    // The embedded database is the process's one connection: borrowed, never closed here.
    return {
      query: (sql, params) => pglite.query(sql, params),
      exec: async (sql) => void (await pglite.exec(sql)),
      close: async () => {},
    };
  }
  const client = new pg.Client({ connectionString: typeof database === 'string' ? database : database.url });
  await client.connect();
  return {
    query: async <R>(sql: string, params?: unknown[]) => ({
      rows: (await client.query(sql, params)).rows as R[],
    }),
    exec: async (sql) => void (await client.query(sql)),
    close: () => client.end(),
  };
}

async function readMigrations(dir: string): Promise<Migration[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const names = entries
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  return Promise.all(
    names.map(async (name) => {
      const bytes = await readFile(join(dir, name, 'migration.sql'));
      return {
        name,
        sql: bytes.toString('utf8'),
        checksum: createHash('sha256').update(bytes).digest('hex'),
      };
    }),
  );
}

async function appliedMigrations(client: SqlSession): Promise<Map<string, AppliedRow>> {
  const { rows } = await client.query<AppliedRow>(
    'SELECT migration_name, checksum, finished_at, rolled_back_at FROM "_prisma_migrations" ORDER BY started_at',
  );
  const applied = new Map<string, AppliedRow>();
  for (const row of rows) {
    if (row.rolled_back_at !== null) continue;
    if (row.finished_at === null) {
      throw new MigrationError(
        `migration ${row.migration_name} failed earlier and was not resolved; fix the database, then mark it rolled back`,
      );
    }
    applied.set(row.migration_name, row);
  }
  return applied;
}

async function applyOne(client: SqlSession, migration: Migration): Promise<void> {
  await client.query('BEGIN');
  try {
    const startedAt = new Date();
    await client.exec(migration.sql);
    await client.query(
      `INSERT INTO "_prisma_migrations" (id, checksum, finished_at, migration_name, started_at, applied_steps_count)
       VALUES ($1, $2, now(), $3, $4, 1)`,
      [randomUUID(), migration.checksum, migration.name, startedAt],
    );
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw new MigrationError(`migration ${migration.name} failed: ${(error as Error).message}`, {
      cause: error,
    });
  }
}
