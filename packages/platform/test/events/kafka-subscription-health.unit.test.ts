import { afterEach, beforeEach, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import kafkajs, { type KafkaMessage } from 'kafkajs';
import {
  encodeEvent,
  KafkaEventBus,
  toKafkaMessage,
  type EventSubscription,
} from '../../src/events/index.js';
import { capturingLogger, consumedRecord, FakeKafka, type FakeConsumer, type LogLine } from './fake-kafka.js';
import { sampleEvent, sampleTopic } from './fixtures.js';

const { KafkaJSError } = kafkajs;

// A subscription's health as readiness reads it, with a fake kafkajs client playing the broker: a
// consumer that crashed for good is not live and is started again; one out of its group longer than a
// join may take is not live; kafkajs's own restarts and rebalances are.

const topic = sampleTopic('kafka-health', 'fixed');

function consumed(seq: number): KafkaMessage {
  const sent = toKafkaMessage(
    encodeEvent(topic, sampleEvent({ eventId: `evt-${seq}`, key: 'k', seq }), undefined),
  );
  return consumedRecord(sent, seq);
}

describe('KafkaEventBus subscription health', () => {
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
      joinTimeoutMs: 200,
      consumerRestart: { initialDelayMs: 10, maxDelayMs: 40 },
    });
  });

  afterEach(async () => {
    await bus.close();
  });

  const crash = (consumer: FakeConsumer, restart: boolean, message = 'TOPIC_AUTHORIZATION_FAILED') =>
    consumer.emit('consumer.crash', { error: new Error(message), groupId: 'g', restart });

  async function subscribed(group = 'g'): Promise<{ subscription: EventSubscription; fake: FakeConsumer }> {
    const subscription = await bus.subscribe(topic, { group, handler: async () => undefined });
    return { subscription, fake: kafka.consumers.at(-1)! };
  }

  it('reports every open subscription live once its consumer joined, and drops closed ones', async () => {
    const { subscription } = await subscribed('a');
    await subscribed('b');

    expect(bus.health()).toEqual([
      { topic: topic.name, group: 'a', state: 'live', live: true },
      { topic: topic.name, group: 'b', state: 'live', live: true },
    ]);
    await subscription.close();
    expect(bus.health().map((health) => health.group)).toEqual(['b']);
    expect(subscription.health()).toMatchObject({ live: false, reason: 'closed' });
  });

  it('stays live through a crash kafkajs restarts from, and a rebalance, that end in a join', async () => {
    const { subscription, fake } = await subscribed();

    crash(fake, true, 'The coordinator is not available');
    expect(subscription.health().live).toBe(true);
    fake.emit('consumer.group_join', {});
    fake.emit('consumer.rebalancing', {});
    expect(subscription.health().live).toBe(true);
    fake.emit('consumer.group_join', {});

    await new Promise((resolve) => setTimeout(resolve, 250));
    expect(subscription.health()).toEqual({ topic: topic.name, group: 'g', state: 'live', live: true });
    expect(kafka.consumers).toHaveLength(1);
  });

  it('is reconnecting once out of its group longer than a join may take, logs it once, and live again when it rejoins', async () => {
    const { subscription, fake } = await subscribed();

    crash(fake, true, 'Connection error: connect ECONNREFUSED');
    await waitFor(() => !subscription.health().live || undefined, { what: 'the subscription down' });
    expect(subscription.health()).toMatchObject({
      state: 'reconnecting',
      live: false,
      reason: expect.stringContaining('out of its group') as unknown as string,
      downSince: expect.any(Date) as unknown as Date,
    });
    expect(subscription.health().reason).toContain('ECONNREFUSED');

    await waitFor(
      () => logs.some((line) => line.message.startsWith('Kafka consumer is reconnecting')) || undefined,
      {
        what: 'the change logged',
      },
    );

    fake.emit('consumer.group_join', {});
    expect(subscription.health().live).toBe(true);
    expect(logs.filter((line) => line.message.startsWith('Kafka consumer is reconnecting'))).toHaveLength(1);
    expect(logs.some((line) => line.message === 'Kafka consumer is live again')).toBe(true);
  });

  it('after a crash kafkajs will not restart from, is not live and starts a fresh consumer until one joins', async () => {
    const { subscription, fake } = await subscribed();
    // The next two consumers crash while starting; the third joins.
    let starts = 0;
    kafka.configureConsumer = (next) => {
      starts += 1;
      next.onRun =
        starts <= 2
          ? (self) => crash(self, false, `still refused ${starts}`)
          : (self) => self.emit('consumer.group_join', {});
    };

    crash(fake, false);
    expect(subscription.health()).toMatchObject({
      state: 'dead',
      live: false,
      reason: 'consumer crashed and is being started again: TOPIC_AUTHORIZATION_FAILED',
    });
    expect(bus.health()).toEqual([subscription.health()]);

    await waitFor(() => subscription.health().live || undefined, {
      what: 'the third consumer to join',
      timeoutMs: 2_000,
    });
    expect(kafka.consumers).toHaveLength(4);
    expect(kafka.consumers.slice(1).map((consumer) => consumer.config.groupId)).toEqual(['g', 'g', 'g']);
    // The consumers that failed to start were disconnected.
    expect(kafka.consumers.slice(1, 3).every((consumer) => consumer.disconnected)).toBe(true);
    expect(logs.filter((line) => line.message === 'Kafka consumer could not be started again')).toHaveLength(
      2,
    );
    expect(logs.some((line) => line.message === 'Kafka consumer started again and joined its group')).toBe(
      true,
    );
  });

  it('gives up the event a handler was retrying when its consumer crashes for good, unacknowledged', async () => {
    let attempts = 0;
    await bus.subscribe(topic, {
      group: 'g',
      handler: async () => {
        attempts += 1;
        throw new Error('database unavailable');
      },
    });
    const fake = kafka.consumers.at(-1)!;
    kafka.configureConsumer = (next) => {
      next.onRun = () => undefined; // never joins: the restart keeps waiting
    };
    const handling = fake.deliver(consumed(1));
    await waitFor(() => attempts >= 2 || undefined, { what: 'a retried attempt' });

    crash(fake, false);

    await expect(handling).rejects.toBeInstanceOf(KafkaJSError);
    const attemptsAtCrash = attempts;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(attempts).toBe(attemptsAtCrash);
  });

  it('stops starting consumers again once closed', async () => {
    const { subscription, fake } = await subscribed();
    crash(fake, false);

    await subscription.close();
    await new Promise((resolve) => setTimeout(resolve, 60));

    expect(kafka.consumers).toHaveLength(1);
    expect(bus.health()).toEqual([]);
  });

  it('closes a consumer that is being started again without waiting for it to join', async () => {
    const { subscription, fake } = await subscribed();
    kafka.configureConsumer = (next) => {
      next.onRun = () => undefined; // never joins
    };
    crash(fake, false);
    await waitFor(() => kafka.consumers.length === 2 || undefined, { what: 'the restarted consumer' });

    const started = Date.now();
    await subscription.close();

    expect(Date.now() - started).toBeLessThan(150);
    expect(kafka.consumers[1]!.disconnected).toBe(true);
  });
});
