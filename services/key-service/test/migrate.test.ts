import { afterAll, afterEach, describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import { applyMigrations, MIGRATIONS_DIR, MigrationError } from '../src/db/migrate.js';

const databases: TestDatabase[] = [];
const directories: string[] = [];

async function freshDatabase(): Promise<TestDatabase> {
  const database = await createTestDatabase({ prefix: 'ks' });
  databases.push(database);
  return database;
}

async function copyOfMigrations(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'ks-migrations-'));
  directories.push(dir);
  await cp(MIGRATIONS_DIR, dir, { recursive: true });
  return dir;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

afterEach(async () => {
  await Promise.all(directories.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
});

afterAll(async () => {
  await Promise.all(databases.map((database) => database.drop()));
});

describe('applyMigrations', () => {
  it('applies every migration once and records it the way Prisma does', async () => {
    const database = await freshDatabase();
    const first = await applyMigrations(database.url);
    expect(first.applied).toContain('20261122000000_init');
    expect(first.alreadyApplied).toEqual([]);

    const rows = await query<{
      migration_name: string;
      checksum: string;
      finished_at: Date | null;
      applied_steps_count: number;
    }>(
      database.url,
      'SELECT migration_name, checksum, finished_at, applied_steps_count FROM "_prisma_migrations"',
    );
    const sql = await readFile(join(MIGRATIONS_DIR, '20261122000000_init', 'migration.sql'));
    expect(rows).toContainEqual({
      migration_name: '20261122000000_init',
      checksum: createHash('sha256').update(sql).digest('hex'),
      finished_at: expect.any(Date),
      applied_steps_count: 1,
    });
    const tables = await query<{ table_name: string }>(
      database.url,
      "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name",
    );
    expect(tables.map((row) => row.table_name)).toEqual(
      expect.arrayContaining(['api_keys', 'spend_reservations', 'limit_hit_reports', 'key_event_outbox']),
    );

    const second = await applyMigrations(database.url);
    expect(second).toEqual({ applied: [], alreadyApplied: first.applied });
  });

  it('applies each migration exactly once when several replicas start together', async () => {
    const database = await freshDatabase();
    const reports = await Promise.all(Array.from({ length: 4 }, () => applyMigrations(database.url)));
    const appliedCounts = reports.map((report) => report.applied.length);
    expect(appliedCounts.filter((count) => count > 0)).toHaveLength(1);
    const rows = await query<{ count: string }>(
      database.url,
      'SELECT count(*)::text AS count FROM "_prisma_migrations" GROUP BY migration_name',
    );
    expect(rows.every((row) => row.count === '1')).toBe(true);
  });

  it('applies a later migration on top, in name order', async () => {
    const database = await freshDatabase();
    const dir = await copyOfMigrations();
    await applyMigrations(database.url, dir);
    await mkdir(join(dir, '20991231000000_add_note'));
    await writeFile(
      join(dir, '20991231000000_add_note', 'migration.sql'),
      'ALTER TABLE api_keys ADD COLUMN note TEXT;',
    );
    const report = await applyMigrations(database.url, dir);
    expect(report.applied).toEqual(['20991231000000_add_note']);
    const columns = await query<{ column_name: string }>(
      database.url,
      "SELECT column_name FROM information_schema.columns WHERE table_name = 'api_keys' AND column_name = 'note'",
    );
    expect(columns).toHaveLength(1);
  });

  it('refuses an applied migration whose file was edited', async () => {
    const database = await freshDatabase();
    const dir = await copyOfMigrations();
    await applyMigrations(database.url, dir);
    const file = join(dir, '20261122000000_init', 'migration.sql');
    await writeFile(file, `${await readFile(file, 'utf8')}\n-- edited\n`);
    await expect(applyMigrations(database.url, dir)).rejects.toThrow(MigrationError);
  });

  it('rolls a failing migration back whole and records nothing', async () => {
    const database = await freshDatabase();
    const dir = await copyOfMigrations();
    await applyMigrations(database.url, dir);
    await mkdir(join(dir, '20991231000000_broken'));
    await writeFile(
      join(dir, '20991231000000_broken', 'migration.sql'),
      'CREATE TABLE half_done (id int);\nSELECT no_such_function();',
    );
    await expect(applyMigrations(database.url, dir)).rejects.toThrow(/20991231000000_broken/);
    const leftovers = await query(
      database.url,
      "SELECT 1 FROM information_schema.tables WHERE table_name = 'half_done'",
    );
    expect(leftovers).toHaveLength(0);
    const recorded = await query(
      database.url,
      `SELECT 1 FROM "_prisma_migrations" WHERE migration_name = '20991231000000_broken'`,
    );
    expect(recorded).toHaveLength(0);
  });
});
