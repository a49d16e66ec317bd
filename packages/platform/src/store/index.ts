export type * from './store.js';
export { StoreError, StoreUnavailableError, StoreCommandError, StoreClosedError } from './errors.js';
export { RedisStore, type RedisStoreOptions } from './redis/redis-store.js';
export { RedisKeyspace, hashTagOf } from './redis/keys.js';
export { openRedisClient, deleteKeysUnder, type RedisClient } from './redis/redis-connection.js';
export { isRedisClusterUrl } from './redis/redis-url.js';
export { MemoryStore, type MemoryStoreOptions } from './memory/memory-store.js';
export { renewWhileHeld, type Renewal } from './renewal.js';
