import { describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { createTestDatabase, TEST_DATABASE_URL } from '../src/index.js';

async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query(sql)).rows as T[];
  } finally {
    await client.end();
  }
}

async function exists(name: string): Promise<boolean> {
  const rows = await query<{ datname: string }>(
    TEST_DATABASE_URL,
    `SELECT datname FROM pg_database WHERE datname = '${name}'`,
  );
  return rows.length === 1;
}

describe('createTestDatabase', () => {
  it('creates an empty database named with the prefix and drops it', async () => {
    const database = await createTestDatabase({ prefix: 'testkit' });
    try {
      expect(database.name).toMatch(/^testkit_[0-9a-f]{12}$/);
      expect(new URL(database.url).pathname).toBe(`/${database.name}`);
      const [row] = await query<{ name: string }>(database.url, 'SELECT current_database() AS name');
      expect(row?.name).toBe(database.name);
    } finally {
      await database.drop();
    }
    expect(await exists(database.name)).toBe(false);
  });

  it('hands the new database to migrate before returning it', async () => {
    const database = await createTestDatabase({
      prefix: 'testkit',
      migrate: (url) => query(url, 'CREATE TABLE migrated (id integer)'),
    });
    try {
      expect(await query(database.url, 'SELECT * FROM migrated')).toEqual([]);
    } finally {
      await database.drop();
    }
  });

  it('drops the database when migrate fails', async () => {
    let created: string | undefined;
    await expect(
      createTestDatabase({
        prefix: 'testkit',
        migrate: async (url) => {
          created = new URL(url).pathname.slice(1);
          throw new Error('migration failed');
        },
      }),
    ).rejects.toThrow('migration failed');
    expect(created).toBeDefined();
    expect(await exists(created!)).toBe(false);
  });

  it('refuses a prefix that is not a plain identifier', async () => {
    await expect(createTestDatabase({ prefix: 'x; DROP DATABASE test' })).rejects.toThrow(/prefix/);
  });
});
