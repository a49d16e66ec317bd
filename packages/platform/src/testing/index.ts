// Helpers for test suites that run against the real Redis and Kafka, and the service token keys of the
// suites' services; not part of any service's runtime.
export { createTestStore, deleteRedisNamespace, TEST_REDIS_URL, type TestStore } from './test-store.js';
export { assertTestKafkaReachable, deleteTestTopics, TEST_KAFKA_BROKERS } from './test-kafka.js';
export {
  TEST_SERVICE_TOKEN_KEYS,
  TEST_SERVICE_TOKEN_SETTINGS,
  testServiceClientOptions,
} from './service-tokens.js';
