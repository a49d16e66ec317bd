import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import type { Struct } from '@bufbuild/protobuf/wkt';
import kafkajs, { type KafkaMessage, type Message } from 'kafkajs';
import { waitFor } from '@svc/testkit';
import {
  encodeEvent,
  EventBusClosedError,
  KafkaEventBus,
  toKafkaMessage,
  type ReceivedEvent,
} from '../../src/events/index.js';
import { capturingLogger, consumedRecord, FakeKafka, type LogLine } from './fake-kafka.js';
import { deferred, readSample, sampleEvent, sampleTopic } from './fixtures.js';

const { KafkaJSError, KafkaJSNonRetriableError, KafkaJSProtocolError, Partitioners } = kafkajs;

// Unit tests of the kafkajs wiring, with a fake client standing in for the broker; the behaviour
// against a real broker is the contract suite (kafka-event-bus.contract.test.ts).

const topic = sampleTopic('kafka-unit', 'fixed');
const event = (seq: number) => sampleEvent({ eventId: `evt-${seq}`, key: `reservation-${seq % 2}`, seq });

function consumed(seq: number, overrides: Partial<KafkaMessage> = {}): KafkaMessage {
  return consumedRecord(toKafkaMessage(encodeEvent(topic, event(seq), 'req-1')), seq, overrides);
}

describe('KafkaEventBus (kafkajs wiring)', () => {
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
      handlerRetry: { initialDelayMs: 1, maxDelayMs: 5 },
      newTopics: { numPartitions: 6, replicationFactor: 3 },
    });
  });

  afterEach(async () => {
    await bus.close();
  });

  const producer = () => kafka.producers[0]!;
  const consumer = () => kafka.consumers[0]!;

  describe('publishing', () => {
    it('uses an idempotent producer with the Java-compatible partitioner and no topic auto-creation', () => {
      expect(producer().config).toEqual({
        idempotent: true,
        maxInFlightRequests: 1,
        allowAutoTopicCreation: false,
        createPartitioner: Partitioners.DefaultPartitioner,
      });
    });

    it('sends each event keyed, with headers, waiting for all in-sync replicas; connects once', async () => {
      await Promise.all([bus.publish(topic, event(1), { requestId: 'req-9' }), bus.publish(topic, event(2))]);

      expect(producer().connects).toBe(1);
      expect(producer().sent).toEqual([
        { topic: topic.name, acks: -1, messages: [toKafkaMessage(encodeEvent(topic, event(1), 'req-9'))] },
        { topic: topic.name, acks: -1, messages: [toKafkaMessage(encodeEvent(topic, event(2), undefined))] },
      ]);
      const [message] = producer().sent[0]!.messages as [Message];
      expect(message.key).toBe('reservation-1');
      expect(message.headers).toEqual({
        'event-id': 'evt-1',
        'event-type': 'google.protobuf.Struct',
        'request-id': 'req-9',
      });
    });

    it('sends a batch as one request, in order', async () => {
      await bus.publishBatch(
        topic,
        [1, 2, 3].map((seq) => ({ message: event(seq) })),
      );

      expect(producer().sent).toHaveLength(1);
      expect(producer().sent[0]!.messages.map((message) => message.headers?.['event-id'])).toEqual([
        'evt-1',
        'evt-2',
        'evt-3',
      ]);
    });

    it('connects again on the next publish after a failed connection', async () => {
      producer().failNextConnect = true;
      await expect(bus.publish(topic, event(1))).rejects.toThrow('connection refused');
      await bus.publish(topic, event(2));

      expect(producer().connects).toBe(2);
      expect(producer().sent).toHaveLength(1);
    });
  });

  it('ensureTopics creates only the missing topics, with the configured layout', async () => {
    const existing = sampleTopic('existing');
    kafka.adminClient.topics.add(existing.name);

    await bus.ensureTopics([topic, existing, topic]);

    expect(kafka.adminClient.created).toEqual([
      { topic: topic.name, numPartitions: 6, replicationFactor: 3 },
    ]);
  });

  describe('subscribing', () => {
    it('pins a brand-new group to the current end of the topic before consuming', async () => {
      await bus.subscribe(topic, { group: 'billing', handler: async () => undefined });

      expect(kafka.adminClient.setOffsetsCalls).toEqual([
        {
          groupId: 'billing',
          topic: topic.name,
          partitions: [
            { partition: 0, offset: '5' },
            { partition: 1, offset: '9' },
          ],
        },
      ]);
      // A fetch waits at most 500 ms for news (kafkajs's 5 s made every close of an idle consumer take 5 s).
      expect(consumer().config).toMatchObject({
        groupId: 'billing',
        allowAutoTopicCreation: false,
        maxWaitTimeInMs: 500,
      });
      expect(consumer().subscription).toEqual({ topics: [topic.name], fromBeginning: false });
      expect(consumer().runConfig).toMatchObject({ autoCommit: true, partitionsConsumedConcurrently: 4 });
    });

    const brokerError = (type: string, retriable: boolean): Error =>
      new KafkaJSProtocolError({ message: type, type, code: 0, retriable } as unknown as Error);

    it('pins a new group all the same when the brokers answer errors a moment cures', async () => {
      // A group's first use on a fresh cluster (its coordinator loading), a topic just created (its
      // leader not serving yet): both seen from a real broker.
      kafka.adminClient.failures.fetchOffsets.push(brokerError('NOT_COORDINATOR_FOR_GROUP', true));
      kafka.adminClient.failures.fetchTopicOffsets.push(brokerError('NOT_LEADER_FOR_PARTITION', true));

      await bus.subscribe(topic, { group: 'billing', handler: async () => undefined });

      expect(kafka.adminClient.fetchOffsetsCalls).toBe(3);
      // The leader error refreshed the metadata kafkajs would otherwise keep for minutes.
      expect(kafka.adminClient.fetchTopicMetadataCalls).toBe(1);
      expect(kafka.adminClient.setOffsetsCalls).toEqual([
        expect.objectContaining({ groupId: 'billing', topic: topic.name }),
      ]);
      expect(kafka.consumers).toHaveLength(1);
    });

    it('fails the subscription at once on an error no retry cures, starting no consumer', async () => {
      const refused = brokerError('GROUP_AUTHORIZATION_FAILED', false);
      kafka.adminClient.failures.fetchOffsets.push(refused);

      await expect(bus.subscribe(topic, { group: 'billing', handler: async () => undefined })).rejects.toBe(
        refused,
      );
      expect(kafka.adminClient.fetchOffsetsCalls).toBe(1);
      expect(kafka.consumers).toHaveLength(0);
    });

    it('consumes unpinned when another member of the new group is running already', async () => {
      kafka.adminClient.failures.setOffsets.push(
        new KafkaJSNonRetriableError(
          'The consumer group must have no running instances, current state: Stable',
        ),
      );

      await bus.subscribe(topic, { group: 'billing', handler: async () => undefined });

      expect(kafka.adminClient.fetchOffsetsCalls).toBe(1);
      expect(consumer().subscription).toEqual({ topics: [topic.name], fromBeginning: false });
    });

    it('leaves a group with committed progress where it is', async () => {
      kafka.adminClient.committed.set('billing', ['3', '-1']);
      await bus.subscribe(topic, { group: 'billing', handler: async () => undefined });

      expect(kafka.adminClient.setOffsetsCalls).toEqual([]);
    });

    it('starts a new group at the earliest offset with fromBeginning', async () => {
      await bus.subscribe(topic, { group: 'audit', handler: async () => undefined, fromBeginning: true });

      expect(kafka.adminClient.setOffsetsCalls).toEqual([]);
      expect(consumer().subscription).toEqual({ topics: [topic.name], fromBeginning: true });
    });

    it('fails, and disconnects the consumer, when it does not join its group in time', async () => {
      await bus.close();
      bus = new KafkaEventBus({
        brokers: ['kafka:9092'],
        clientId: 'test',
        client: kafka,
        joinTimeoutMs: 20,
      });
      kafka.configureConsumer = (fake) => {
        fake.onRun = () => undefined;
      };

      await expect(bus.subscribe(topic, { group: 'g', handler: async () => undefined })).rejects.toThrow(
        /did not join its group within 20 ms/,
      );
      expect(kafka.consumers.at(-1)?.disconnected).toBe(true);
    });

    it('fails, and disconnects the consumer, when it crashes before joining its group', async () => {
      kafka.configureConsumer = (fake) => {
        fake.onRun = () => fake.emit('consumer.crash', { error: new Error('SASL failed'), restart: false });
      };

      await expect(bus.subscribe(topic, { group: 'g', handler: async () => undefined })).rejects.toThrow(
        'SASL failed',
      );
      expect(consumer().disconnected).toBe(true);
    });
  });

  describe('consuming', () => {
    async function subscribed(handler: (event: ReceivedEvent<Struct>) => Promise<void>) {
      const subscription = await bus.subscribe(topic, { group: 'g', handler });
      return { subscription, fake: kafka.consumers.at(-1)! };
    }

    it('hands the decoded event to the handler and acknowledges only after the handler finished', async () => {
      const release = deferred();
      const received: ReceivedEvent<Struct>[] = [];
      const { fake } = await subscribed(async (incoming) => {
        received.push(incoming);
        await release.promise;
      });

      let acknowledged = false;
      const handling = fake.deliver(consumed(1)).then(() => {
        acknowledged = true;
      });
      await new Promise((resolve) => setImmediate(resolve));
      expect(received).toHaveLength(1);
      expect(acknowledged).toBe(false);

      release.resolve();
      await handling;
      expect(acknowledged).toBe(true);
      expect(received[0]).toMatchObject({
        topic: topic.name,
        eventId: 'evt-1',
        key: 'reservation-1',
        typeName: 'google.protobuf.Struct',
        requestId: 'req-1',
        attempt: 1,
      });
      expect(readSample(received[0]!.message).seq).toBe(1);
    });

    it('retries a failing handler, heartbeating between attempts, then acknowledges', async () => {
      const attempts: number[] = [];
      const { fake } = await subscribed(async (incoming) => {
        attempts.push(incoming.attempt);
        if (incoming.attempt < 3) throw new Error('downstream unavailable');
      });
      let heartbeats = 0;

      await fake.deliver(consumed(1), async () => {
        heartbeats += 1;
      });

      expect(attempts).toEqual([1, 2, 3]);
      expect(heartbeats).toBe(2);
      expect(logs.filter((line) => line.level === 'warn')).toHaveLength(2);
      expect(logs.find((line) => line.level === 'warn')?.fields).toMatchObject({
        topic: topic.name,
        group: 'g',
        eventId: 'evt-1',
        attempt: 1,
      });
    });

    it('keeps heartbeating while it waits out a long backoff', async () => {
      await bus.close();
      bus = new KafkaEventBus({
        brokers: ['kafka:9092'],
        clientId: 'test',
        client: kafka,
        sessionTimeoutMs: 30,
        handlerRetry: { initialDelayMs: 100, maxDelayMs: 100, jitter: 0 },
      });
      const { fake } = await subscribed(async (incoming) => {
        if (incoming.attempt === 1) throw new Error('downstream unavailable');
      });
      let heartbeats = 0;

      await fake.deliver(consumed(1), async () => {
        heartbeats += 1;
      });

      // One 100 ms wait, heartbeating every 10 ms (a third of the session timeout).
      expect(heartbeats).toBe(10);
      expect(fake.config.heartbeatInterval).toBe(10);
    });

    it('stops retrying without acknowledging when a heartbeat reports a rebalance', async () => {
      let attempts = 0;
      const { fake } = await subscribed(async () => {
        attempts += 1;
        throw new Error('downstream unavailable');
      });
      const rebalancing = new KafkaJSError('The group is rebalancing', { retriable: true });

      await expect(fake.deliver(consumed(1), () => Promise.reject(rebalancing))).rejects.toBe(rebalancing);
      expect(attempts).toBe(1);
    });

    it('on close, abandons the retries without acknowledging and disconnects after the handler settled', async () => {
      let attempts = 0;
      const { subscription, fake } = await subscribed(async () => {
        attempts += 1;
        throw new Error('downstream unavailable');
      });
      const handling = fake.deliver(consumed(1));
      await waitFor(() => attempts >= 2 || undefined, { what: 'a retried attempt' });

      await subscription.close();

      await expect(handling).rejects.toBeInstanceOf(KafkaJSError);
      expect(fake.disconnected).toBe(true);
      const attemptsAtClose = attempts;
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(attempts).toBe(attemptsAtClose);
    });

    it('skips, with an error log, a record of another type instead of blocking its partition', async () => {
      let handled = 0;
      const { fake } = await subscribed(async () => {
        handled += 1;
      });
      const foreign = consumed(1);
      foreign.headers!['event-type'] = Buffer.from('svc.keys.v1.KeyMinted');

      await fake.deliver(foreign);

      expect(handled).toBe(0);
      expect(logs.filter((line) => line.level === 'error')).toEqual([
        expect.objectContaining({
          message: 'skipping a record that cannot be decoded',
          fields: expect.objectContaining({ topic: topic.name, group: 'g', offset: '1' }),
        }),
      ]);
    });
  });

  describe('closing', () => {
    it('closes every consumer, then the producer and the admin client, and refuses further use', async () => {
      await bus.subscribe(topic, { group: 'a', handler: async () => undefined });
      await bus.subscribe(topic, { group: 'b', handler: async () => undefined });
      await bus.publish(topic, event(1));

      await bus.close();

      expect(kafka.consumers.map((fake) => fake.disconnected)).toEqual([true, true]);
      expect(producer().disconnects).toBe(1);
      expect(kafka.adminClient.disconnects).toBe(1);
      await expect(bus.publish(topic, event(2))).rejects.toBeInstanceOf(EventBusClosedError);
      await expect(bus.ensureTopics([topic])).rejects.toBeInstanceOf(EventBusClosedError);
    });
  });
});
