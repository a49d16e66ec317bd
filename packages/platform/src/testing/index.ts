// Helpers for test suites that run against the real Redis; not part of any service's runtime.
export { createTestStore, deleteRedisNamespace, TEST_REDIS_URL, type TestStore } from './test-store.js';
