import { randomBytes } from 'node:crypto';
import type { Store } from '@svc/platform';
import pg from 'pg';
import { runKeyServiceOn, type RunningKeyService } from '../../test/support/key-service-target.js';

// The benchmarks run outside jest, where @svc/testkit cannot be loaded (its index loads jest's globals), so
// they make their key-service's database here: on the server the tests use, dropped afterwards.
const DATABASE_SERVER_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

function withDatabase(name: string): string {
  const url = new URL(DATABASE_SERVER_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function onMaintenanceDatabase(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase('postgres') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A real key-service (as the tests run it) on a fresh PostgreSQL database, dropped on close. */
export async function startBenchKeyService(store: Store): Promise<RunningKeyService> {
  const name = `gw_bench_${randomBytes(6).toString('hex')}`;
  await onMaintenanceDatabase(`CREATE DATABASE ${name}`);
  return runKeyServiceOn(store, {
    url: withDatabase(name),
    drop: () => onMaintenanceDatabase(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  });
}
