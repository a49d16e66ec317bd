import { create } from '@bufbuild/protobuf';
import { TimestampSchema } from '@bufbuild/protobuf/wkt';
import { afterEach, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import { defineTopic, EmbeddedEventBus, InvalidEventError } from '../../src/events/index.js';
import { describeEventBusContract } from './event-bus-contract.js';
import { burst, readSample, sampleEvent, sampleTopic } from './fixtures.js';

describeEventBusContract(
  'EmbeddedEventBus',
  () => new EmbeddedEventBus({ handlerRetry: { initialDelayMs: 5, maxDelayMs: 20 } }),
);

describe('EmbeddedEventBus', () => {
  const fastRetry = { initialDelayMs: 5, maxDelayMs: 20 };
  let bus: EmbeddedEventBus;

  afterEach(async () => {
    await bus.close();
  });

  it("spreads a group's partitions over its consumers", async () => {
    bus = new EmbeddedEventBus({ partitions: 8, handlerRetry: fastRetry });
    const topic = sampleTopic('spread');
    let first = 0;
    let second = 0;
    await bus.subscribe(topic, { group: 'g', handler: async () => void (first += 1) });
    await bus.subscribe(topic, { group: 'g', handler: async () => void (second += 1) });

    await bus.publishBatch(
      topic,
      burst(100, 20).map((message) => ({ message })),
    );

    await waitFor(() => first + second === 100 || undefined, { what: '100 deliveries' });
    expect(first).toBeGreaterThan(0);
    expect(second).toBeGreaterThan(0);
  });

  it('hands an event whose handler keeps failing to the next member when its consumer leaves', async () => {
    bus = new EmbeddedEventBus({ partitions: 1, handlerRetry: fastRetry });
    const topic = sampleTopic('handover');
    let failedAttempts = 0;
    const failing = await bus.subscribe(topic, {
      group: 'g',
      handler: async () => {
        failedAttempts += 1;
        throw new Error('downstream unavailable');
      },
    });
    const events = burst(3, 1);
    await bus.publishBatch(
      topic,
      events.map((message) => ({ message })),
    );
    await waitFor(() => failedAttempts >= 2 || undefined, { what: 'a retried failure' });

    const healthy: number[] = [];
    await bus.subscribe(topic, {
      group: 'g',
      handler: async (event) => void healthy.push(readSample(event.message).seq),
    });
    // With one partition the newcomer only gets work once the failing member leaves.
    await failing.close();
    const attemptsAtClose = failedAttempts;

    await waitFor(() => healthy.length === 3 || undefined, { what: 'the successor to handle all 3 events' });
    expect(healthy).toEqual([0, 1, 2]);
    expect(failedAttempts).toBe(attemptsAtClose);
  });

  it('keeps the newest events per partition; fromBeginning starts at the oldest retained', async () => {
    bus = new EmbeddedEventBus({ partitions: 1, retainedEventsPerPartition: 10 });
    const topic = sampleTopic('retention');
    await bus.publishBatch(
      topic,
      burst(100, 1).map((message) => ({ message })),
    );

    const replayed: number[] = [];
    await bus.subscribe(topic, {
      group: 'late',
      fromBeginning: true,
      handler: async (event) => void replayed.push(readSample(event.message).seq),
    });

    await waitFor(() => replayed.length === 10 || undefined, { what: 'the retained events' });
    expect(replayed).toEqual(Array.from({ length: 10 }, (_, i) => 90 + i));
  });

  it('publishes nothing from a batch that holds an invalid event', async () => {
    bus = new EmbeddedEventBus();
    const topic = sampleTopic('atomic');
    const seen: string[] = [];
    await bus.subscribe(topic, { group: 'g', handler: async (event) => void seen.push(event.eventId) });

    const valid = sampleEvent({ eventId: 'valid', key: 'k', seq: 0 });
    const keyless = sampleEvent({ eventId: 'keyless', key: '', seq: 1 });
    await expect(bus.publishBatch(topic, [{ message: valid }, { message: keyless }])).rejects.toBeInstanceOf(
      InvalidEventError,
    );

    await bus.publish(topic, sampleEvent({ eventId: 'after', key: 'k', seq: 2 }));
    await waitFor(() => seen.length >= 1 || undefined, { what: 'the later event' });
    expect(seen).toEqual(['after']);
  });

  it('refuses a topic name already used with another message type', async () => {
    bus = new EmbeddedEventBus();
    const structs = sampleTopic('clash', 'fixed');
    const timestamps = defineTopic({
      name: structs.name,
      schema: TimestampSchema,
      key: (message) => String(message.seconds),
      eventId: (message) => `${message.seconds}.${message.nanos}`,
    });
    await bus.ensureTopics([structs]);

    await expect(bus.publish(timestamps, create(TimestampSchema, { seconds: 1n }))).rejects.toBeInstanceOf(
      InvalidEventError,
    );
    await expect(
      bus.subscribe(timestamps, { group: 'g', handler: async () => undefined }),
    ).rejects.toBeInstanceOf(InvalidEventError);
  });

  it('reports a crashed consumer not live until it recovers; its group goes on without it', async () => {
    bus = new EmbeddedEventBus({ partitions: 2, handlerRetry: fastRetry });
    const topic = sampleTopic('crash');
    const crashedSeen: number[] = [];
    const otherSeen: number[] = [];
    const crashed = await bus.subscribe(topic, {
      group: 'g',
      handler: async (event) => void crashedSeen.push(readSample(event.message).seq),
    });
    await bus.subscribe(topic, {
      group: 'g',
      handler: async (event) => void otherSeen.push(readSample(event.message).seq),
    });

    await bus.simulateConsumerCrash(crashed, 'SASL authentication failed');
    expect(crashed.health()).toEqual({
      topic: topic.name,
      group: 'g',
      state: 'dead',
      live: false,
      reason: 'SASL authentication failed',
      downSince: expect.any(Date),
    });
    expect(bus.health().map((health) => health.live)).toEqual([false, true]);

    await bus.publishBatch(
      topic,
      burst(10, 4).map((message) => ({ message })),
    );
    await waitFor(() => otherSeen.length === 10 || undefined, {
      what: 'the live member to take every event',
    });
    expect(crashedSeen).toEqual([]);

    bus.simulateConsumerRecovery(crashed);
    expect(crashed.health()).toEqual({ topic: topic.name, group: 'g', state: 'live', live: true });
    await bus.publishBatch(
      topic,
      burst(10, 4).map((message) => ({ message })),
    );
    await waitFor(() => crashedSeen.length + otherSeen.length === 20 || undefined, { what: '20 deliveries' });
    expect(crashedSeen.length).toBeGreaterThan(0);
  });

  it('reports consumers reconnecting during a simulated broker outage, and delivers what was held once it ends', async () => {
    bus = new EmbeddedEventBus({ partitions: 2, handlerRetry: fastRetry, publishTimeoutMs: 1_000 });
    const topic = sampleTopic('outage');
    const seen: number[] = [];
    const subscription = await bus.subscribe(topic, {
      group: 'g',
      handler: async (event) => void seen.push(readSample(event.message).seq),
    });

    bus.simulateBrokerOutage(true);
    expect(subscription.health()).toMatchObject({
      state: 'reconnecting',
      live: false,
      downSince: expect.any(Date) as unknown as Date,
    });
    const held = bus.publish(topic, sampleEvent({ eventId: 'held', key: 'k', seq: 1 }));

    bus.simulateBrokerOutage(false);
    await held;
    expect(subscription.health()).toEqual({ topic: topic.name, group: 'g', state: 'live', live: true });
    await waitFor(() => seen.length === 1 || undefined, { what: 'the held event' });
    expect(seen).toEqual([1]);
  });

  it('hands the event a crashed consumer was handling to the next member', async () => {
    bus = new EmbeddedEventBus({ partitions: 1, handlerRetry: fastRetry });
    const topic = sampleTopic('crash-mid-handler');
    let crashedAttempts = 0;
    const crashed = await bus.subscribe(topic, {
      group: 'g',
      handler: async () => {
        crashedAttempts += 1;
        throw new Error('stuck');
      },
    });
    const successor: string[] = [];
    await bus.subscribe(topic, { group: 'g', handler: async (event) => void successor.push(event.eventId) });
    await bus.publish(topic, sampleEvent({ eventId: 'held', key: 'k', seq: 0 }));
    await waitFor(() => crashedAttempts >= 2 || undefined, { what: 'a retried attempt' });

    await bus.simulateConsumerCrash(crashed, 'gone');

    await waitFor(() => successor.length === 1 || undefined, { what: 'the successor to get the event' });
    expect(successor).toEqual(['held']);
  });

  it('rejects nonsensical options', () => {
    expect(() => new EmbeddedEventBus({ partitions: 0 })).toThrow(RangeError);
    expect(() => new EmbeddedEventBus({ retainedEventsPerPartition: 1.5 })).toThrow(RangeError);
    expect(() => new EmbeddedEventBus({ handlerRetry: { initialDelayMs: 100, maxDelayMs: 10 } })).toThrow(
      RangeError,
    );
    bus = new EmbeddedEventBus();
  });
});
