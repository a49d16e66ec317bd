import { setTimeout as sleep } from 'node:timers/promises';
import type { DescMessage } from '@bufbuild/protobuf';
import type { EventBusLogger } from './delivery.js';
import { EventBusClosedError } from './errors.js';
import type { EventBus, EventSubscription, SubscribeOptions } from './event-bus.js';
import { retryDelayMs, type RetryPolicy } from './retry-policy.js';
import type { EventTopic } from './topic.js';

/** Backoff between attempts while the brokers cannot be reached. */
export const SUBSCRIBE_RETRY: RetryPolicy = {
  initialDelayMs: 1_000,
  maxDelayMs: 30_000,
  multiplier: 2,
  jitter: 0.2,
};

export interface RetriedSubscriptionSettings {
  readonly logger: EventBusLogger;
  /** Topics created (when missing) in each attempt, before subscribing. */
  readonly ensureTopics?: readonly EventTopic[];
  /** Said in the warning of each failed attempt: what goes without the consumer meanwhile. */
  readonly meanwhile: string;
  readonly retry?: RetryPolicy;
}

/**
 * A subscription made in the background, tried again with a backoff while it fails (the brokers
 * unreachable, a topic not creatable yet): a service must not wait for Kafka to start, or a pod restarted
 * during an outage would never start. Health and readiness see the consumer once it is subscribed.
 */
export class RetriedSubscription<Desc extends DescMessage> {
  /** Resolves once subscribed; rejects when the bus closes or this is closed first. */
  readonly subscribed: Promise<EventSubscription>;
  /** Resolves after the first attempt: true when it subscribed. */
  readonly firstAttempt: Promise<boolean>;
  readonly #stopped = new AbortController();
  #subscription: EventSubscription | undefined;

  constructor(
    bus: EventBus,
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
    settings: RetriedSubscriptionSettings,
  ) {
    let firstAttemptDone!: (subscribed: boolean) => void;
    this.firstAttempt = new Promise((resolve) => (firstAttemptDone = resolve));
    this.subscribed = this.#subscribe(bus, topic, options, settings, firstAttemptDone);
    // A caller that only awaits firstAttempt must not see an unhandled rejection on close.
    this.subscribed.catch(() => undefined);
  }

  /**
   * Stops trying and closes the subscription if it was made. An attempt under way is not waited for (it
   * may take the bus's join timeout): its subscription is closed when it comes, or with the bus.
   */
  async close(): Promise<void> {
    this.#stopped.abort();
    if (this.#subscription) return this.#subscription.close();
    void this.subscribed.then((subscription) => subscription.close()).catch(() => undefined);
  }

  async #subscribe(
    bus: EventBus,
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
    settings: RetriedSubscriptionSettings,
    firstAttemptDone: (subscribed: boolean) => void,
  ): Promise<EventSubscription> {
    const { logger, ensureTopics, meanwhile, retry = SUBSCRIBE_RETRY } = settings;
    for (let attempt = 1; ; attempt += 1) {
      this.#stopped.signal.throwIfAborted();
      try {
        if (ensureTopics) await bus.ensureTopics(ensureTopics);
        const subscription = await bus.subscribe(topic, options);
        if (!this.#stopped.signal.aborted) this.#subscription = subscription;
        firstAttemptDone(true);
        if (attempt > 1)
          logger.info({ topic: topic.name, group: options.group, attempt }, 'subscribed at last');
        return subscription;
      } catch (error) {
        firstAttemptDone(false);
        if (error instanceof EventBusClosedError) throw error;
        const retryInMs = retryDelayMs(retry, attempt);
        logger.warn(
          { err: error, topic: topic.name, group: options.group, attempt, retryInMs },
          `could not subscribe; trying again (${meanwhile})`,
        );
        // Not holding the process open: a stopping service does not wait for the next attempt.
        await sleep(retryInMs, undefined, { ref: false, signal: this.#stopped.signal });
      }
    }
  }
}
