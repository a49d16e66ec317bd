// Only main.test.ts still imports this; the other suites call @svc/testkit's createTestDatabase
// themselves. Goes when that test does too.
import { createTestDatabase as createDatabase, type TestDatabase } from '@svc/testkit';
import { applyMigrations } from '../../src/db/migrate.js';

export type { TestDatabase };

export function createTestDatabase(options: { migrate?: boolean } = {}): Promise<TestDatabase> {
  return createDatabase({
    prefix: 'ks',
    ...(options.migrate === false ? {} : { migrate: (url: string) => applyMigrations(url) }),
  });
}
