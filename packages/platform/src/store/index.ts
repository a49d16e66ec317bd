export type * from './store.js';
export { StoreError, StoreUnavailableError, StoreCommandError, StoreClosedError } from './errors.js';
export { RedisStore, type RedisStoreOptions } from './redis/redis-store.js';
export { RedisKeyspace } from './redis/keys.js';
export { MemoryStore, type MemoryStoreOptions } from './memory/memory-store.js';
