import { mkdirSync } from 'node:fs';
import { PGlite } from '@electric-sql/pglite';
import type { Logger } from '@svc/platform';
import pg from 'pg';

/**
 * The PostgreSQL a service's data lives in: a server reached by URL, or PGlite (PostgreSQL compiled
 * to WebAssembly) running inside this process with its files in a local directory.
 */
export type DatabaseConnection =
  | { readonly kind: 'server'; readonly url: string }
  | { readonly kind: 'embedded'; readonly pglite: PGlite; readonly dataDir: string };

export interface DatabaseSettings {
  readonly DATABASE_URL: string | undefined;
}

export interface OpenedDatabase {
  readonly connection: DatabaseConnection;
  close(): Promise<void>;
}

/**
 * DATABASE_URL when set (created when missing if `createIfMissing`, as the all-in-one mode does for
 * a fresh local server), else an embedded PGlite whose data stays in `embeddedDir` across restarts.
 */
export async function openDatabase(
  settings: DatabaseSettings,
  options: { embeddedDir: string; createIfMissing: boolean; logger: Logger },
): Promise<OpenedDatabase> {
  if (settings.DATABASE_URL) {
    if (options.createIfMissing) await createDatabaseIfMissing(settings.DATABASE_URL);
    return { connection: { kind: 'server', url: settings.DATABASE_URL }, close: async () => {} };
  }
  mkdirSync(options.embeddedDir, { recursive: true });
  const pglite = await PGlite.create({ dataDir: options.embeddedDir, startParams: EMBEDDED_START_PARAMS });
  options.logger.info(
    { dataDir: options.embeddedDir },
    'DATABASE_URL is unset: using the embedded PostgreSQL (PGlite) in this process',
  );
  return {
    connection: { kind: 'embedded', pglite, dataDir: options.embeddedDir },
    close: () => pglite.close(),
  };
}

/**
 * PGlite's own settings, with a smaller buffer cache: PostgreSQL's 128 MB default (PGlite's, 160 MB) is
 * touched in full inside the WebAssembly memory, which never shrinks, and a local database of keys and
 * usage fits in 16 MB many times over (measured: about 120 MB less resident memory, `npm start` idle).
 */
const EMBEDDED_START_PARAMS = [...PGlite.defaultStartParams, '-c', 'shared_buffers=16MB'];

async function createDatabaseIfMissing(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString() });
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount === 0) await client.query(`create database "${name.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
}
