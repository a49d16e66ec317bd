import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import kafkajs from 'kafkajs';
import { KafkaEventBus, parseKafkaBrokers, type EventTopic } from '../../src/events/index.js';
import { assertTestKafkaReachable, deleteTestTopics, TEST_KAFKA_BROKERS } from '../../src/testing/index.js';
import { describeEventBusContract } from './event-bus-contract.js';
import { capturingLogger } from './fake-kafka.js';
import { sampleTopic } from './fixtures.js';

const { ConfigResourceTypes, Kafka, logLevel } = kafkajs;

// The contract suite against a real broker: KAFKA_BROKERS, else the one `bash scripts/ensure-services.sh`
// starts on 127.0.0.1:9092. Every test makes topics and groups with names of their own, so runs sharing
// the broker (and reruns) never meet; the topics are deleted at the end.

const brokers = parseKafkaBrokers(TEST_KAFKA_BROKERS);

/** The bus, remembering the topics it was asked to create so the suite can delete them. */
class TopicRecordingKafkaEventBus extends KafkaEventBus {
  static readonly created = new Set<string>();

  override async ensureTopics(topics: readonly EventTopic[]): Promise<void> {
    for (const topic of topics) TopicRecordingKafkaEventBus.created.add(topic.name);
    await super.ensureTopics(topics);
  }
}

beforeAll(async () => {
  await assertTestKafkaReachable();
}, 30_000);

afterAll(async () => {
  await deleteTestTopics([...TopicRecordingKafkaEventBus.created]);
}, 30_000);

describeEventBusContract(
  'KafkaEventBus',
  () =>
    new TopicRecordingKafkaEventBus({
      brokers,
      clientId: 'svc-event-bus-contract',
      newTopics: { numPartitions: 4 },
      handlerRetry: { initialDelayMs: 20, maxDelayMs: 100 },
    }),
  { testTimeoutMs: 120_000, deliveryTimeoutMs: 60_000 },
);

describe('KafkaEventBus topics on a real broker', () => {
  it('creates a named topic with its layout and configs, and warns when its settings later differ', async () => {
    const topic = sampleTopic('layout');
    const busWith = (partitions: number, retentionMs: number) => {
      const captured = capturingLogger();
      const bus = new TopicRecordingKafkaEventBus({
        brokers,
        clientId: 'svc-event-bus-contract',
        logger: captured.logger,
        topics: { [topic.name]: { partitions, replicationFactor: 1, retentionMs, minInSyncReplicas: 1 } },
      });
      return { bus, logs: captured.lines };
    };

    const creating = busWith(3, 3_600_000);
    await creating.bus.ensureTopics([topic]);
    await creating.bus.close();

    const admin = new Kafka({
      clientId: 'svc-event-bus-contract',
      brokers,
      logLevel: logLevel.NOTHING,
    }).admin();
    await admin.connect();
    try {
      const metadata = await admin.fetchTopicMetadata({ topics: [topic.name] });
      expect(metadata.topics[0]?.partitions).toHaveLength(3);
      const described = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [
          {
            type: ConfigResourceTypes.TOPIC,
            name: topic.name,
            configNames: ['cleanup.policy', 'retention.ms', 'min.insync.replicas'],
          },
        ],
      });
      const configs = Object.fromEntries(
        (described.resources[0]?.configEntries ?? []).map((entry) => [entry.configName, entry.configValue]),
      );
      expect(configs).toEqual({
        'cleanup.policy': 'delete',
        'retention.ms': '3600000',
        'min.insync.replicas': '1',
      });
    } finally {
      await admin.disconnect();
    }

    const same = busWith(3, 3_600_000);
    await same.bus.ensureTopics([topic]);
    await same.bus.close();
    expect(same.logs.filter((line) => line.level === 'warn')).toEqual([]);

    const drifted = busWith(5, 7_200_000);
    await drifted.bus.ensureTopics([topic]);
    await drifted.bus.close();
    expect(drifted.logs.filter((line) => line.level === 'warn')).toEqual([
      expect.objectContaining({
        message: expect.stringContaining('Kafka topic exists with another layout'),
        fields: expect.objectContaining({ topic: topic.name, differing: ['partitions', 'retentionMs'] }),
      }),
    ]);
  }, 60_000);
});
