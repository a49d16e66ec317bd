import { createServer, type AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from '@jest/globals';
import kafkajs from 'kafkajs';
import {
  EmbeddedEventBus,
  KafkaEventBus,
  PublishTimeoutError,
  type EventBus,
} from '../../src/events/index.js';
import { waitUntil } from '@svc/testkit';
import { sendOrderWaitMs } from '../../src/events/kafka/kafka-options.js';
import { capturingLogger, FakeKafka } from './fake-kafka.js';
import { sampleEvent, sampleTopic } from './fixtures.js';

// publish and publishBatch give up after the publish timeout with a typed error instead of waiting on
// an unreachable broker for as long as kafkajs keeps retrying.

const { Kafka, logLevel } = kafkajs;

const topic = sampleTopic('publish-timeout', 'fixed');
const event = (seq: number) => sampleEvent({ eventId: `evt-${seq}`, key: 'k', seq });

/** A local port nothing listens on: bound once for a free number, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function rejectionOf(work: Promise<unknown>): Promise<{ error: unknown; ms: number }> {
  const started = Date.now();
  try {
    await work;
  } catch (error) {
    return { error, ms: Date.now() - started };
  }
  throw new Error('expected a rejection');
}

describe('publish timeout', () => {
  let bus: EventBus | undefined;

  afterEach(async () => {
    await bus?.close();
    bus = undefined;
  });

  it('a real kafkajs client pointed at a closed port rejects with PublishTimeoutError, and closes promptly', async () => {
    // kafkajs retries a refused connection, and nothing stops those retries; a short retry budget (still
    // longer than the publish timeout) keeps them from outliving the test.
    const client = new Kafka({
      clientId: 'publish-timeout-test',
      brokers: [`127.0.0.1:${await closedPort()}`],
      connectionTimeout: 100,
      retry: { initialRetryTime: 300, retries: 2 },
      logLevel: logLevel.NOTHING,
    });
    const kafka = new KafkaEventBus({
      brokers: [],
      clientId: 'publish-timeout-test',
      client,
      publishTimeoutMs: 300,
    });
    bus = kafka;

    // Together: both wait on the one connection kafkajs is retrying (about 0.9 s before it gives up).
    const [single, batch] = await Promise.all([
      rejectionOf(kafka.publish(topic, event(1))),
      rejectionOf(kafka.publishBatch(topic, [{ message: event(2) }, { message: event(3) }])),
    ]);

    expect(single.error).toBeInstanceOf(PublishTimeoutError);
    expect(single.error).toMatchObject({ topic: topic.name, timeoutMs: 300, events: 1 });
    expect((single.error as Error).message).toBe(
      `${topic.name}: the broker did not acknowledge the event within 300 ms`,
    );
    expect(single.ms).toBeGreaterThanOrEqual(290);
    expect(single.ms).toBeLessThan(2_000);
    expect(batch.error).toMatchObject({ name: 'PublishTimeoutError', events: 2 });
    expect(batch.ms).toBeLessThan(2_000);

    const closing = Date.now();
    await kafka.close();
    expect(Date.now() - closing).toBeLessThan(2_000);
    await sleep(1_500); // kafkajs gives up its connection attempts meanwhile
  }, 15_000);

  it('rejects a send the broker never answers, and close waits for it no longer than the publish timeout', async () => {
    const fake = new FakeKafka();
    const kafka = new KafkaEventBus({
      brokers: ['kafka:9092'],
      clientId: 'test',
      client: fake,
      publishTimeoutMs: 50,
    });
    bus = kafka;
    fake.producers[0]!.hangSends = true;

    const { error, ms } = await rejectionOf(kafka.publish(topic, event(1)));

    expect(error).toBeInstanceOf(PublishTimeoutError);
    expect(ms).toBeGreaterThanOrEqual(40);
    const closing = Date.now();
    await kafka.close();
    expect(Date.now() - closing).toBeLessThan(200);
    expect(fake.producers[0]!.disconnects).toBe(1);
  });

  describe('a send that outlives its timeout', () => {
    // Timeouts: SHORT where a publish timing out is the point, LONG (2 s) for what must not time out on a
    // loaded machine. The bus has one timeout, so a test whose publish times out and whose retry must not
    // uses LONG for both and waits it out once.
    const SHORT = 50;
    const LONG = 2_000;

    function heldBus(
      publishTimeoutMs: number,
      order: { requestTimeoutMs?: number; maxRetryTimeMs?: number } = {},
    ) {
      const fake = new FakeKafka();
      const captured = capturingLogger();
      const kafka = new KafkaEventBus({
        brokers: ['kafka:9092'],
        clientId: 'test',
        client: fake,
        publishTimeoutMs,
        logger: captured.logger,
        ...order,
      });
      const producer = fake.producers[0]!;
      producer.holdSends = true;
      const landed = () =>
        producer.sent.map((record) =>
          record.messages.map((m) => m.key?.toString() + ':' + String(m.headers?.['event-id'])).join(','),
        );
      const sendsHeld = (count: number) =>
        waitUntil(
          () => producer.heldSends,
          (held) => held === count,
          { what: `${count} held sends`, timeoutMs: LONG, intervalMs: 2 },
        );
      return { kafka, producer, landed, sendsHeld, lines: captured.lines };
    }

    it('lets a retry go out only after the attempt it repeats has settled, so the original lands first', async () => {
      const { kafka, producer, landed } = heldBus(LONG);
      bus = kafka;
      // The first attempt times out, but kafkajs keeps it going.
      await expect(kafka.publish(topic, event(1))).rejects.toBeInstanceOf(PublishTimeoutError);
      expect(producer.heldSends).toBe(1);

      // The caller retries (the same event, then the next one): not sent while the first is pending.
      const retry = kafka.publishBatch(topic, [{ message: event(1) }, { message: event(2) }]);
      await sleep(10);
      expect(producer.heldSends).toBe(1);

      producer.releaseHeldSends();
      await retry;
      // The late original, then the retry: a duplicate after its original, never an event before an earlier one.
      expect(landed()).toEqual(['k:evt-1', 'k:evt-1,k:evt-2']);
    });

    it('sends the retry alone when the timed-out attempt finally failed', async () => {
      const { kafka, producer, landed } = heldBus(LONG);
      bus = kafka;
      await expect(kafka.publish(topic, event(1))).rejects.toBeInstanceOf(PublishTimeoutError);
      const retry = kafka.publish(topic, event(1));
      producer.releaseHeldSends(false);
      await retry;
      expect(landed()).toEqual(['k:evt-1']);
    });

    it('never sends a queued publish whose caller gave up before its turn: retries during an outage are not piled up', async () => {
      const { kafka, producer, landed, sendsHeld } = heldBus(LONG);
      bus = kafka;
      // The first attempt starts and hangs; two retries queue behind it and time out there, unsent.
      const attempts = [
        kafka.publish(topic, event(1)),
        kafka.publish(topic, event(1)),
        kafka.publish(topic, event(1)),
      ];
      for (const attempt of attempts) await expect(attempt).rejects.toBeInstanceOf(PublishTimeoutError);
      await sendsHeld(1);

      // The retry that is still waiting when the brokers answer again is the only one sent after the original.
      const retry = kafka.publishBatch(topic, [{ message: event(1) }, { message: event(2) }]);
      producer.releaseHeldSends();
      await retry;
      expect(landed()).toEqual(['k:evt-1', 'k:evt-1,k:evt-2']);
    });

    it('keeps other topics moving while one topic waits', async () => {
      const { kafka, producer, landed, sendsHeld } = heldBus(LONG);
      bus = kafka;
      const first = kafka.publish(topic, event(1));
      await sendsHeld(1);
      producer.holdSends = false;
      await kafka.publish(sampleTopic('publish-timeout-other', 'fixed'), event(9));
      expect(landed()).toEqual(['k:evt-9']);
      producer.releaseHeldSends();
      await first;
      expect(landed()).toEqual(['k:evt-9', 'k:evt-1']);
    });

    it('stops waiting for a started send after the publish timeout, a request timeout and the longest backoff, with a warning', async () => {
      // Waits for a started send at most 2 000 + 100 + 100 ms from its start.
      const { kafka, producer, landed, lines } = heldBus(LONG, {
        requestTimeoutMs: 100,
        maxRetryTimeMs: 100,
      });
      bus = kafka;
      const started = Date.now();
      await expect(kafka.publish(topic, event(1))).rejects.toBeInstanceOf(PublishTimeoutError);
      producer.holdSends = false; // the first send stays stuck, later ones are answered

      await kafka.publish(topic, event(2));
      expect(Date.now() - started).toBeGreaterThanOrEqual(2_150); // it did wait, up to the bound
      expect(landed()).toEqual(['k:evt-2']);
      expect(lines).toContainEqual({
        level: 'warn',
        fields: { topic: topic.name, events: 1, pendingMs: expect.any(Number) },
        message: expect.stringContaining('Kafka send still unacknowledged'),
      });
      // Later publishes no longer wait for the stuck send either; it may still land, after them.
      await kafka.publish(topic, event(3));
      producer.releaseHeldSends();
      expect(landed()).toEqual(['k:evt-2', 'k:evt-3', 'k:evt-1']);
      expect(lines.filter((line) => line.level === 'warn')).toHaveLength(1);
    });

    it('close waits for a timed-out send that may still land, up to one publish timeout', async () => {
      const { kafka, producer } = heldBus(LONG);
      bus = kafka;
      await expect(kafka.publish(topic, event(1))).rejects.toBeInstanceOf(PublishTimeoutError);
      setTimeout(() => producer.releaseHeldSends(), 30);
      await kafka.close();
      expect(producer.sent).toHaveLength(1);
      expect(producer.disconnects).toBe(1);
    });

    it('close waits for the started send only: a queued one whose caller gave up is never sent', async () => {
      const { kafka, producer } = heldBus(SHORT);
      bus = kafka;
      await expect(kafka.publish(topic, event(1))).rejects.toBeInstanceOf(PublishTimeoutError);
      await expect(kafka.publish(topic, event(2))).rejects.toBeInstanceOf(PublishTimeoutError);
      // Only the started send is waited for: once it lands, close goes on at once.
      setTimeout(() => producer.releaseHeldSends(), 10);
      await kafka.close();
      expect(producer.sent).toHaveLength(1);
      expect(producer.disconnects).toBe(1);
    });
  });

  it("waits for a started send the publish timeout plus kafkajs's request timeout and longest backoff", () => {
    expect(sendOrderWaitMs({ publishTimeoutMs: 5_000 })).toBe(65_000);
    expect(
      sendOrderWaitMs({ publishTimeoutMs: 5_000, requestTimeoutMs: 10_000, maxRetryTimeMs: 2_000 }),
    ).toBe(17_000);
    expect(() => sendOrderWaitMs({ publishTimeoutMs: 5_000, maxRetryTimeMs: 0 })).toThrow(RangeError);
    expect(
      () =>
        new KafkaEventBus({
          brokers: ['k:1'],
          clientId: 't',
          client: new FakeKafka(),
          requestTimeoutMs: 1.5,
        }),
    ).toThrow(RangeError);
  });

  it('refuses a publish timeout that is not a positive integer', () => {
    expect(
      () =>
        new KafkaEventBus({ brokers: ['k:1'], clientId: 't', client: new FakeKafka(), publishTimeoutMs: 0 }),
    ).toThrow(RangeError);
    expect(() => new EmbeddedEventBus({ publishTimeoutMs: 1.5 })).toThrow(RangeError);
  });

  describe('the embedded bus, during a simulated broker outage', () => {
    it('holds publishes, rejects them with PublishTimeoutError after the timeout, publishing nothing', async () => {
      const embedded = new EmbeddedEventBus({ publishTimeoutMs: 50 });
      bus = embedded;
      const seen: string[] = [];
      await embedded.subscribe(topic, { group: 'g', handler: async (e) => void seen.push(e.eventId) });

      embedded.simulateBrokerOutage(true);
      const { error, ms } = await rejectionOf(embedded.publish(topic, event(1)));
      expect(error).toBeInstanceOf(PublishTimeoutError);
      expect(ms).toBeGreaterThanOrEqual(40);

      // A publish waiting when the outage ends goes through.
      const waiting = embedded.publish(topic, event(2));
      await new Promise((resolve) => setTimeout(resolve, 10));
      embedded.simulateBrokerOutage(false);
      await waiting;
      await embedded.publish(topic, event(3));

      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(seen).toEqual(['evt-2', 'evt-3']);
    });
  });
});
