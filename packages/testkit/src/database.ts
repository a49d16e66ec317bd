import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The PostgreSQL server the suites share: `DATABASE_URL`'s, or the local test server. */
export const TEST_DATABASE_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

export interface TestDatabaseOptions {
  /** Start of the database's name, before `_<random>` (default `test`): lower case, digits, `_`. */
  prefix?: string;
  /** Prepares the new database, e.g. `(url) => applyMigrations(url)`; it is dropped if this fails. */
  migrate?: (url: string) => Promise<unknown>;
  /** A URL of the server to create it on (default `TEST_DATABASE_URL`); its database part is ignored. */
  serverUrl?: string;
}

export interface TestDatabase {
  /** Connection URL of the new database. */
  readonly url: string;
  readonly name: string;
  /** Drops the database, closing whatever connections are still open to it. */
  drop(): Promise<void>;
}

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function onMaintenanceDatabase(serverUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(serverUrl, 'postgres') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * A fresh database of its own for one test file, `<prefix>_<random>` on the shared server, migrated
 * by `migrate` when given; `drop` it after the tests.
 */
export async function createTestDatabase(options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const { prefix = 'test', migrate, serverUrl = TEST_DATABASE_URL } = options;
  if (!/^[a-z][a-z0-9_]{0,40}$/.test(prefix)) {
    throw new Error(`database prefix ${JSON.stringify(prefix)} is not a lower-case identifier`);
  }
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await onMaintenanceDatabase(serverUrl, `CREATE DATABASE ${name}`);
  const database: TestDatabase = {
    url: withDatabase(serverUrl, name),
    name,
    drop: () => onMaintenanceDatabase(serverUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
  if (migrate) {
    try {
      await migrate(database.url);
    } catch (error) {
      await database.drop();
      throw error;
    }
  }
  return database;
}
