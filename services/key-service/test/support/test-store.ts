import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { RedisStore } from '@svc/platform';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';

export interface TestStore {
  /** A new store over the shared namespace (two of them act like two replicas). */
  open(): RedisStore;
  readonly namespace: string;
  /** Closes every store opened and deletes every key of the namespace. */
  cleanup(): Promise<void>;
}

/** A Redis namespace of its own for one test file, so suites sharing the server never see each other. */
export function createTestStore(): TestStore {
  const namespace = `ks-test-${randomBytes(6).toString('hex')}`;
  const opened: RedisStore[] = [];
  return {
    namespace,
    open() {
      const store = new RedisStore({ redis: REDIS_URL, namespace });
      opened.push(store);
      return store;
    },
    async cleanup() {
      await Promise.all(opened.map((store) => store.close()));
      const redis = new Redis(REDIS_URL);
      try {
        let cursor = '0';
        do {
          const [next, keys] = await redis.scan(cursor, 'MATCH', `${namespace}:*`, 'COUNT', 500);
          if (keys.length > 0) await redis.del(...keys);
          cursor = next;
        } while (cursor !== '0');
      } finally {
        redis.disconnect();
      }
    },
  };
}
