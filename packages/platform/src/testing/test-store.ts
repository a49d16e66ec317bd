import { randomBytes } from 'node:crypto';
import { deleteKeysUnder, openRedisClient, RedisStore } from '../store/index.js';

/** The Redis the test suites share: `REDIS_URL`, or the standard local port. */
export const TEST_REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface TestStore {
  /** A new store over the shared namespace (two of them act like two replicas). */
  open(): RedisStore;
  readonly namespace: string;
  /** Closes every store opened and deletes every key of the namespace. */
  cleanup(): Promise<void>;
}

/**
 * Deletes every key under `namespace` (SCAN, so a large namespace does not block the server; on every
 * primary when `url` names a cluster).
 */
export async function deleteRedisNamespace(namespace: string, url = TEST_REDIS_URL): Promise<void> {
  const redis = openRedisClient(url);
  try {
    await deleteKeysUnder(redis, namespace);
  } finally {
    redis.disconnect();
  }
}

/**
 * A Redis namespace of its own for one test file, so suites sharing the real server never see each
 * other's keys; `cleanup` leaves nothing behind.
 */
export function createTestStore(label = 'test'): TestStore {
  const namespace = `${label}-${randomBytes(6).toString('hex')}`;
  const opened: RedisStore[] = [];
  return {
    namespace,
    open() {
      const store = new RedisStore({ redis: TEST_REDIS_URL, namespace });
      opened.push(store);
      return store;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      await deleteRedisNamespace(namespace);
    },
  };
}
