import { describe, it } from '@jest/globals';
import { KafkaEventBus, parseKafkaBrokers } from '../../src/events/index.js';
import { describeEventBusContract } from './event-bus-contract.js';

// No Kafka broker can run on the development machines; CI or a developer with a broker sets
// KAFKA_BROKERS (host:port[,host:port]) and the same contract suite runs against it.
const brokers = process.env.KAFKA_BROKERS;

if (brokers) {
  describeEventBusContract(
    'KafkaEventBus',
    () =>
      new KafkaEventBus({
        brokers: parseKafkaBrokers(brokers),
        clientId: 'svc-event-bus-contract',
        newTopics: { numPartitions: 4 },
        handlerRetry: { initialDelayMs: 20, maxDelayMs: 100 },
      }),
    { testTimeoutMs: 120_000, deliveryTimeoutMs: 60_000 },
  );
} else {
  // Straight to stderr: jest swallows console output of a suite whose tests are all skipped.
  process.stderr.write(
    'KafkaEventBus contract suite skipped: no Kafka broker is reachable here. Set KAFKA_BROKERS=host:port to run it.\n',
  );
  describe('EventBus contract: KafkaEventBus', () => {
    it.skip('needs a Kafka broker (set KAFKA_BROKERS)', () => undefined);
  });
}
