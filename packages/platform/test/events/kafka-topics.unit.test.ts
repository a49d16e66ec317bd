import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { KafkaEventBus } from '../../src/events/index.js';
import { capturingLogger, FakeKafka, type LogLine } from './fake-kafka.js';
import { sampleTopic } from './fixtures.js';

// ensureTopics creates the product's topics with the layout their settings give (partitions,
// replication, retention, min.insync.replicas, cleanup.policy=delete), creates others with the
// broker-default layout, and only warns about an existing topic whose layout differs.

const lifecycle = sampleTopic('lifecycle', 'fixed');
const keys = sampleTopic('keys', 'fixed');
const other = sampleTopic('other', 'fixed');

describe('KafkaEventBus.ensureTopics', () => {
  let kafka: FakeKafka;
  let logs: LogLine[];
  let bus: KafkaEventBus;

  beforeEach(() => {
    kafka = new FakeKafka();
    const captured = capturingLogger();
    logs = captured.lines;
    bus = new KafkaEventBus({
      brokers: ['kafka:9092'],
      clientId: 'test',
      client: kafka,
      logger: captured.logger,
      topics: {
        [lifecycle.name]: {
          partitions: 12,
          replicationFactor: 3,
          retentionMs: 604_800_000,
          minInSyncReplicas: 2,
        },
        [keys.name]: { partitions: 6, replicationFactor: 3, retentionMs: -1, minInSyncReplicas: 2 },
      },
    });
  });

  afterEach(async () => {
    await bus.close();
  });

  it('creates each missing named topic with its settings, and others with the broker defaults', async () => {
    await bus.ensureTopics([lifecycle, keys, other, lifecycle]);

    expect(kafka.adminClient.created).toEqual([
      {
        topic: lifecycle.name,
        numPartitions: 12,
        replicationFactor: 3,
        configEntries: [
          { name: 'cleanup.policy', value: 'delete' },
          { name: 'retention.ms', value: '604800000' },
          { name: 'min.insync.replicas', value: '2' },
        ],
      },
      {
        topic: keys.name,
        numPartitions: 6,
        replicationFactor: 3,
        configEntries: [
          { name: 'cleanup.policy', value: 'delete' },
          { name: 'retention.ms', value: '-1' },
          { name: 'min.insync.replicas', value: '2' },
        ],
      },
      { topic: other.name, numPartitions: -1, replicationFactor: -1 },
    ]);
    expect(logs.filter((line) => line.level === 'warn')).toEqual([]);
  });

  it('leaves an existing topic as it is, warning of every setting it differs in', async () => {
    kafka.adminClient.topics.add(lifecycle.name);
    kafka.adminClient.topics.add(keys.name);
    kafka.adminClient.layouts.set(lifecycle.name, {
      partitions: 1,
      replicationFactor: 1,
      configs: { 'retention.ms': '86400000', 'min.insync.replicas': '1', 'cleanup.policy': 'delete' },
    });
    kafka.adminClient.layouts.set(keys.name, {
      partitions: 6,
      replicationFactor: 3,
      configs: { 'retention.ms': '-1', 'min.insync.replicas': '2', 'cleanup.policy': 'delete' },
    });

    await bus.ensureTopics([lifecycle, keys]);

    expect(kafka.adminClient.created).toEqual([]);
    const warnings = logs.filter((line) => line.level === 'warn');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.fields).toMatchObject({
      topic: lifecycle.name,
      differing: ['partitions', 'replicationFactor', 'retentionMs', 'minInSyncReplicas'],
      actual: { partitions: 1, replicationFactor: 1, retentionMs: 86_400_000, minInSyncReplicas: 1 },
    });
  });

  it('skips the check when the brokers refuse to describe the topic', async () => {
    kafka.adminClient.topics.add(lifecycle.name);
    kafka.adminClient.describeConfigsFails = true;

    await expect(bus.ensureTopics([lifecycle])).resolves.toBeUndefined();
    expect(logs.filter((line) => line.level === 'warn')).toEqual([]);
  });

  it('refuses settings Kafka would refuse', () => {
    const make = (settings: Record<string, number>) =>
      new KafkaEventBus({
        brokers: ['kafka:9092'],
        clientId: 'test',
        client: new FakeKafka(),
        topics: {
          t: { partitions: 1, replicationFactor: 1, retentionMs: 1000, minInSyncReplicas: 1, ...settings },
        },
      });
    expect(() => make({ partitions: 0 })).toThrow(RangeError);
    expect(() => make({ minInSyncReplicas: 2 })).toThrow(/invalid settings of topic t/);
    expect(() => make({ retentionMs: 0 })).toThrow(RangeError);
    expect(() => make({ retentionMs: -1 })).not.toThrow();
  });
});
