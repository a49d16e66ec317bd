import { afterEach, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import {
  EmbeddedEventBus,
  EventBusClosedError,
  RetriedSubscription,
  type EventBus,
  type RetryPolicy,
} from '../../src/events/index.js';
import { createLogger } from '../../src/logging/index.js';
import { readSample, sampleEvent, sampleTopic } from './fixtures.js';

// A service subscribes in the background while the brokers cannot be reached, so that it starts (and
// serves) through a Kafka outage, and consumes once they are back.

const logger = createLogger({ service: 'retried-subscription-test', level: 'silent' });
const FAST: RetryPolicy = { initialDelayMs: 10, maxDelayMs: 20, multiplier: 2, jitter: 0 };

/** The embedded bus, whose ensureTopics and subscribe fail while `unreachable` says so. */
function flakyBus(inner: EmbeddedEventBus, unreachable: () => boolean): EventBus & { attempts: number } {
  const bus = Object.create(inner) as EventBus & { attempts: number };
  bus.attempts = 0;
  bus.ensureTopics = async (topics) => {
    bus.attempts += 1;
    if (unreachable()) throw new Error('connect ECONNREFUSED');
    return inner.ensureTopics(topics);
  };
  bus.subscribe = (topic, options) => inner.subscribe(topic, options);
  bus.publish = (topic, message, options) => inner.publish(topic, message, options);
  return bus;
}

const buses: EmbeddedEventBus[] = [];
afterEach(async () => {
  await Promise.all(buses.splice(0).map((bus) => bus.close()));
});

function embedded(): EmbeddedEventBus {
  const bus = new EmbeddedEventBus();
  buses.push(bus);
  return bus;
}

describe('RetriedSubscription', () => {
  it('subscribes on the first attempt when the brokers answer', async () => {
    const topic = sampleTopic('retried-first');
    const seen: string[] = [];
    const subscription = new RetriedSubscription(
      embedded(),
      topic,
      { group: 'g', handler: async ({ message }) => void seen.push(readSample(message).eventId) },
      { logger, ensureTopics: [topic], meanwhile: 'nothing', retry: FAST },
    );
    expect(await subscription.firstAttempt).toBe(true);
    await subscription.subscribed;
    await subscription.close();
  });

  it('keeps trying while the brokers cannot be reached, then consumes', async () => {
    const inner = embedded();
    let down = true;
    const bus = flakyBus(inner, () => down);
    const topic = sampleTopic('retried-outage');
    const seen: string[] = [];
    const subscription = new RetriedSubscription(
      bus,
      topic,
      { group: 'g', handler: async ({ message }) => void seen.push(readSample(message).eventId) },
      { logger, ensureTopics: [topic], meanwhile: 'nothing', retry: FAST },
    );
    // The caller goes on (a service starts) after the first failed attempt.
    expect(await subscription.firstAttempt).toBe(false);
    await waitFor(() => bus.attempts >= 3 || undefined, { what: 'three attempts' });
    down = false;
    await subscription.subscribed;
    await inner.publish(topic, sampleEvent({ eventId: 'after', key: 'k', seq: 1 }));
    await waitFor(() => seen.includes('after') || undefined, { what: 'the event consumed' });
    await subscription.close();
  });

  it('stops trying once closed, and rejects when the bus closes first', async () => {
    const inner = embedded();
    const bus = flakyBus(inner, () => true);
    const topic = sampleTopic('retried-closed');
    const closed = new RetriedSubscription(
      bus,
      topic,
      { group: 'g', handler: async () => undefined },
      { logger, ensureTopics: [topic], meanwhile: 'nothing', retry: FAST },
    );
    await closed.firstAttempt;
    await closed.close();
    await expect(closed.subscribed).rejects.toThrow();
    const attempts = bus.attempts;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(bus.attempts).toBe(attempts);

    const other = embedded();
    await other.close();
    const never = new RetriedSubscription(
      other,
      topic,
      { group: 'g', handler: async () => undefined },
      { logger, meanwhile: 'nothing', retry: FAST },
    );
    await expect(never.subscribed).rejects.toBeInstanceOf(EventBusClosedError);
  });
});
