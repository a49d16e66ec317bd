// `svc-server --target migrate`, the command the Helm chart's migration Job runs.
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { applyMigrations } from '@svc/key-service';
import { createTestDatabase, type TestDatabase } from '@svc/testkit';
import { runMigrations } from '../src/migrate.js';

describe('--target migrate', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase({ prefix: 'server_migrate' });
  });
  afterAll(async () => {
    await database?.drop();
  });

  it("applies the key-service's migrations to DATABASE_URL, then finds nothing left to do", async () => {
    expect(await runMigrations({ DATABASE_URL: database.url, LOG_LEVEL: 'fatal' })).toBe(0);
    const report = await applyMigrations(database.url);
    expect(report.applied).toEqual([]);
    expect(report.alreadyApplied.length).toBeGreaterThan(0);
    expect(await runMigrations({ DATABASE_URL: database.url, LOG_LEVEL: 'fatal' })).toBe(0);
  });

  it('exits 1 without DATABASE_URL (it never migrates an embedded database)', async () => {
    expect(await runMigrations({ LOG_LEVEL: 'fatal' })).toBe(1);
  });

  it('exits 1 on an invalid setting or a server it cannot reach', async () => {
    expect(await runMigrations({ DATABASE_URL: 'mysql://db/svc', LOG_LEVEL: 'fatal' })).toBe(1);
    expect(
      await runMigrations({ DATABASE_URL: 'postgresql://postgres@127.0.0.1:1/none', LOG_LEVEL: 'fatal' }),
    ).toBe(1);
  });
});
