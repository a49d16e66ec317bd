import type { DescMessage } from '@bufbuild/protobuf';
import type { Admin, Consumer } from 'kafkajs';
import type { EventBusLogger } from '../delivery.js';
import type { EventSubscription, SubscribeOptions } from '../event-bus.js';
import type { RetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { kafkaMessageHandler } from './kafka-message-handler.js';
import type { KafkaClient } from './kafka-options.js';

export interface KafkaSubscriptionSettings {
  readonly client: KafkaClient;
  readonly admin: () => Promise<Admin>;
  readonly retry: RetryPolicy;
  readonly logger: EventBusLogger;
  readonly partitionsConsumedConcurrently: number;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  readonly joinTimeoutMs: number;
}

/** One kafkajs consumer in one group, consuming one topic. */
export class KafkaSubscription implements EventSubscription {
  readonly #consumer: Consumer;
  readonly #stopping: AbortController;
  #closing: Promise<void> | undefined;

  private constructor(consumer: Consumer, stopping: AbortController) {
    this.#consumer = consumer;
    this.#stopping = stopping;
  }

  static async start<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
    settings: KafkaSubscriptionSettings,
  ): Promise<KafkaSubscription> {
    const { group, handler, fromBeginning = false } = options;
    const { logger } = settings;
    if (!fromBeginning) await startNewGroupAtEnd(await settings.admin(), group, topic.name, logger);

    const consumer = settings.client.consumer({
      groupId: group,
      allowAutoTopicCreation: false,
      sessionTimeout: settings.sessionTimeoutMs,
      heartbeatInterval: settings.heartbeatIntervalMs,
    });
    consumer.on(consumer.events.CRASH, ({ payload }) =>
      logger.error(
        { err: payload.error, topic: topic.name, group, restart: payload.restart },
        'Kafka consumer crashed',
      ),
    );
    const stopping = new AbortController();
    const subscription = new KafkaSubscription(consumer, stopping);
    const joined = waitForGroupJoin(consumer, settings.joinTimeoutMs);
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [topic.name], fromBeginning });
      await consumer.run({
        autoCommit: true,
        partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
        eachMessage: kafkaMessageHandler(topic, handler, {
          group,
          retry: settings.retry,
          logger,
          signal: stopping.signal,
          heartbeatIntervalMs: settings.heartbeatIntervalMs,
        }),
      });
      await joined.promise;
    } catch (error) {
      joined.cancel();
      await subscription.close().catch(() => undefined);
      throw error;
    }
    return subscription;
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      // Abort first so a handler waiting to retry gives up at once; disconnect then waits for the
      // in-flight handler and commits what was acknowledged.
      this.#stopping.abort();
      await this.#consumer.disconnect();
    })();
    return this.#closing;
  }
}

/**
 * Pins a group that has never committed on this topic to the topic's current end. Left to itself, a
 * new kafkajs consumer looks up "latest" only at its first fetch, after `subscribe` has resolved, and
 * events published in between would never reach the group.
 */
async function startNewGroupAtEnd(
  admin: Admin,
  group: string,
  topic: string,
  logger: EventBusLogger,
): Promise<void> {
  const [committed] = await admin.fetchOffsets({ groupId: group, topics: [topic] });
  if (committed?.partitions.some(({ offset }) => Number(offset) >= 0)) return;
  const ends = await admin.fetchTopicOffsets(topic);
  try {
    await admin.setOffsets({
      groupId: group,
      topic,
      partitions: ends.map(({ partition, offset }) => ({ partition, offset })),
    });
  } catch (error) {
    // Another member of this new group is already running (setOffsets needs an idle group); the group's
    // own start-up has placed its offsets, at most a moment earlier.
    logger.debug(
      { err: error, topic, group },
      'new consumer group is already running; not pinning its start',
    );
  }
}

function waitForGroupJoin(
  consumer: Consumer,
  timeoutMs: number,
): { promise: Promise<void>; cancel: () => void } {
  let cancel = (): void => undefined;
  const promise = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => finish(new Error(`Kafka consumer did not join its group within ${timeoutMs} ms`)),
      timeoutMs,
    );
    const removeJoin = consumer.on(consumer.events.GROUP_JOIN, () => finish());
    const removeCrash = consumer.on(consumer.events.CRASH, ({ payload }) => {
      if (!payload.restart) finish(payload.error);
    });
    function finish(error?: Error): void {
      clearTimeout(timer);
      removeJoin();
      removeCrash();
      if (error) reject(error);
      else resolve();
    }
    cancel = () => finish();
  });
  // Marked handled now: a timeout that fires while connect() is still running must not crash the
  // process as an unhandled rejection; `start` awaits the promise and sees the error.
  promise.catch(() => undefined);
  return { promise, cancel };
}
