import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { applyMigrations } from '../../src/db/migrate.js';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function onMaintenanceDb<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: withDatabase(SERVER_URL, 'postgres') });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** A fresh database for one test file (`ks_<random>`), migrated unless asked not to; drop it afterwards. */
export async function createTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  const name = `ks_${randomBytes(6).toString('hex')}`;
  await onMaintenanceDb((client) => client.query(`CREATE DATABASE ${name}`));
  const url = withDatabase(SERVER_URL, name);
  if (options.migrate !== false) await applyMigrations(url);
  return {
    url,
    name,
    drop: () =>
      onMaintenanceDb((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(
        () => undefined,
      ),
  };
}
