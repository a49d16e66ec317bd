import kafkajs from 'kafkajs';
import { parseKafkaBrokers } from '../events/index.js';

const { Kafka, logLevel } = kafkajs;

/**
 * The Kafka brokers the test suites share: `KAFKA_BROKERS`, or the single-node broker that
 * `scripts/ensure-services.sh` starts on 127.0.0.1:9092.
 */
export const TEST_KAFKA_BROKERS = process.env.KAFKA_BROKERS || '127.0.0.1:9092';

/**
 * Fails within seconds, saying how to start one, when no broker answers: a missing broker would
 * otherwise show as each test timing out on kafkajs's retries.
 */
export async function assertTestKafkaReachable(brokers = TEST_KAFKA_BROKERS): Promise<void> {
  const admin = new Kafka({
    clientId: 'svc-test-probe',
    brokers: parseKafkaBrokers(brokers),
    connectionTimeout: 2_000,
    requestTimeout: 5_000,
    retry: { retries: 1 },
    logLevel: logLevel.NOTHING,
  }).admin();
  try {
    await admin.connect();
    await admin.describeCluster();
  } catch (error) {
    throw new Error(
      `No Kafka broker answers at ${brokers} (KAFKA_BROKERS, default 127.0.0.1:9092): ` +
        `start the test broker with \`bash scripts/ensure-services.sh\`. ${(error as Error).message}`,
      { cause: error },
    );
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}

/** Deletes topics a suite created (each with a name of its own), so runs do not pile them up. */
export async function deleteTestTopics(
  topics: readonly string[],
  brokers = TEST_KAFKA_BROKERS,
): Promise<void> {
  if (topics.length === 0) return;
  const admin = new Kafka({
    clientId: 'svc-test-cleanup',
    brokers: parseKafkaBrokers(brokers),
    logLevel: logLevel.NOTHING,
  }).admin();
  try {
    await admin.connect();
    await admin.deleteTopics({ topics: [...new Set(topics)], timeout: 10_000 });
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
}
