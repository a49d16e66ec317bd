import type { DescMessage } from '@bufbuild/protobuf';
import type { Admin, Consumer } from 'kafkajs';
import type { EventBusLogger } from '../delivery.js';
import type { EventSubscription, SubscribeOptions, SubscriptionHealth } from '../event-bus.js';
import type { RetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { kafkaMessageHandler } from './kafka-message-handler.js';
import { startNewGroupAtEnd } from './new-group-start.js';
import type { KafkaClient } from './kafka-options.js';

export interface KafkaSubscriptionSettings {
  readonly client: KafkaClient;
  readonly admin: () => Promise<Admin>;
  readonly retry: RetryPolicy;
  readonly logger: EventBusLogger;
  readonly partitionsConsumedConcurrently: number;
  readonly sessionTimeoutMs: number;
  readonly heartbeatIntervalMs: number;
  /** How long a consumer may take to join its group; out of it longer than this, it is `reconnecting`. */
  readonly joinTimeoutMs: number;
  /** Backoff between attempts to start again a consumer that crashed for good. */
  readonly restart: { readonly initialDelayMs: number; readonly maxDelayMs: number };
  readonly now?: () => number;
}

/**
 * How long the broker may hold a fetch that finds nothing new: the Java client's `fetch.max.wait.ms`.
 * Stopping a consumer waits for its fetch in flight, so kafkajs's 5 s made every close of an idle
 * consumer (each shutdown, each `close()`) take 5 s.
 */
const FETCH_MAX_WAIT_MS = 500;

/**
 * One subscription in one group, consuming one topic through a kafkajs consumer. kafkajs restarts a
 * consumer by itself after a retriable crash; after one it will not restart (`restart: false`: an
 * authorization failure, a topic gone) the subscription starts a fresh consumer itself, with a backoff,
 * until one joins. Meanwhile `health()` says it is `dead`. A consumer out of its group longer than a join
 * may take, while kafkajs keeps restarting it (the brokers gone, no coordinator), is `reconnecting`.
 * Each change away from live, and back, is logged once.
 */
export class KafkaSubscription implements EventSubscription {
  readonly #topic: EventTopic<DescMessage>;
  readonly #options: SubscribeOptions<DescMessage>;
  readonly #settings: KafkaSubscriptionSettings;
  readonly #now: () => number;
  /** Aborted when the subscription closes. */
  readonly #stopping = new AbortController();
  #consumer: Consumer | undefined;
  #launching: Promise<void> | undefined;
  #closing: Promise<void> | undefined;
  /** Set while the consumer is out of its group (rebalancing, or restarting after a crash). */
  #outOfGroupSince: number | undefined;
  /** Set once the consumer crashed for good, until a new one joins. */
  #dead: { since: number } | undefined;
  #lastError: string | undefined;
  #restartTimer: NodeJS.Timeout | undefined;
  #restartAttempts = 0;
  /** Fires once the consumer has been out of its group for a join timeout, to log that it is reconnecting. */
  #reconnectingTimer: NodeJS.Timeout | undefined;
  /** Whether a state other than live was logged, so getting back is logged too. */
  #downLogged = false;
  /** Stops the current consumer's handlers when the subscription closes. */
  #stopRunning: (() => void) | undefined;

  private constructor(
    topic: EventTopic<DescMessage>,
    options: SubscribeOptions<DescMessage>,
    settings: KafkaSubscriptionSettings,
  ) {
    this.#topic = topic;
    this.#options = options;
    this.#settings = settings;
    this.#now = settings.now ?? Date.now;
  }

  static async start<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
    settings: KafkaSubscriptionSettings,
  ): Promise<KafkaSubscription> {
    const { group, fromBeginning = false } = options;
    if (!fromBeginning) await startNewGroupAtEnd(await settings.admin(), group, topic.name, settings.logger);
    const subscription = new KafkaSubscription(
      topic as unknown as EventTopic<DescMessage>,
      options as unknown as SubscribeOptions<DescMessage>,
      settings,
    );
    try {
      await subscription.#startConsumer();
    } catch (error) {
      await subscription.close().catch(() => undefined);
      throw error;
    }
    return subscription;
  }

  health(): SubscriptionHealth {
    const topic = this.#topic.name;
    const { group } = this.#options;
    if (this.#closing) return { topic, group, state: 'dead', live: false, reason: 'closed' };
    if (this.#dead) {
      return {
        topic,
        group,
        state: 'dead',
        live: false,
        reason: `consumer crashed and is being started again: ${this.#lastError ?? 'unknown error'}`,
        downSince: new Date(this.#dead.since),
      };
    }
    const since = this.#outOfGroupSince;
    if (since !== undefined && this.#now() - since >= this.#settings.joinTimeoutMs) {
      return {
        topic,
        group,
        state: 'reconnecting',
        live: false,
        reason: `consumer out of its group longer than ${this.#settings.joinTimeoutMs} ms: ${this.#lastError ?? 'rejoining'}`,
        downSince: new Date(since),
      };
    }
    return { topic, group, state: 'live', live: true };
  }

  close(): Promise<void> {
    this.#closing ??= (async () => {
      // Abort first so a handler waiting to retry gives up at once and a pending restart never runs;
      // disconnect then waits for the in-flight handler and commits what was acknowledged.
      this.#stopping.abort();
      clearTimeout(this.#restartTimer);
      clearTimeout(this.#reconnectingTimer);
      await this.#launching?.catch(() => undefined);
      await this.#consumer?.disconnect();
    })();
    return this.#closing;
  }

  /** Creates, connects and runs a consumer; resolves once it joined its group. */
  #startConsumer(): Promise<void> {
    const launching = this.#launch().finally(() => {
      if (this.#launching === launching) this.#launching = undefined;
    });
    this.#launching = launching;
    return launching;
  }

  async #launch(): Promise<void> {
    const { client, logger } = this.#settings;
    const { group, handler, fromBeginning = false } = this.#options;
    const topic = this.#topic;
    const consumer = client.consumer({
      groupId: group,
      allowAutoTopicCreation: false,
      sessionTimeout: this.#settings.sessionTimeoutMs,
      heartbeatInterval: this.#settings.heartbeatIntervalMs,
      maxWaitTimeInMs: FETCH_MAX_WAIT_MS,
    });
    // Aborted when this consumer stops for good (the subscription closes, or it crashed without restart),
    // so a handler waiting to retry gives its event up to the group's next owner.
    const running = new AbortController();
    const stopRunning = (): void => running.abort();
    // One listener on the subscription's signal at a time, however often the consumer is replaced.
    if (this.#stopRunning) this.#stopping.signal.removeEventListener('abort', this.#stopRunning);
    this.#stopRunning = stopRunning;
    this.#stopping.signal.addEventListener('abort', stopRunning, { once: true });
    this.#consumer = consumer;
    const current = (): boolean => this.#consumer === consumer && !this.#closing;
    consumer.on(consumer.events.GROUP_JOIN, () => {
      if (current()) this.#joinedGroup();
    });
    consumer.on(consumer.events.REBALANCING, () => {
      if (current()) this.#leftGroup('the group is rebalancing');
    });
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      logger.error(
        { err: payload.error, topic: topic.name, group, restart: payload.restart },
        'Kafka consumer crashed',
      );
      if (!current()) return;
      this.#leftGroup(payload.error?.message ?? String(payload.error));
      if (payload.restart) return; // kafkajs starts it again by itself
      running.abort();
      this.#dead ??= { since: this.#outOfGroupSince ?? this.#now() };
      this.#downLogged = true;
      // A crash while starting fails the start instead (its caller decides what comes next).
      if (!this.#launching) this.#scheduleRestart();
    });

    const joined = waitForGroupJoin(consumer, this.#settings.joinTimeoutMs);
    const cancelJoinWait = (): void => joined.cancel();
    this.#stopping.signal.addEventListener('abort', cancelJoinWait, { once: true });
    try {
      await consumer.connect();
      await consumer.subscribe({ topics: [topic.name], fromBeginning });
      await consumer.run({
        autoCommit: true,
        partitionsConsumedConcurrently: this.#settings.partitionsConsumedConcurrently,
        eachMessage: kafkaMessageHandler(topic, handler, {
          group,
          retry: this.#settings.retry,
          logger,
          signal: running.signal,
          heartbeatIntervalMs: this.#settings.heartbeatIntervalMs,
        }),
      });
      await joined.promise;
    } catch (error) {
      joined.cancel();
      running.abort();
      throw error;
    } finally {
      this.#stopping.signal.removeEventListener('abort', cancelJoinWait);
    }
  }

  #joinedGroup(): void {
    clearTimeout(this.#reconnectingTimer);
    this.#reconnectingTimer = undefined;
    if (this.#downLogged) {
      const since = this.#dead?.since ?? this.#outOfGroupSince;
      this.#settings.logger.info(
        {
          topic: this.#topic.name,
          group: this.#options.group,
          downForMs: since === undefined ? undefined : this.#now() - since,
        },
        'Kafka consumer is live again',
      );
    }
    this.#downLogged = false;
    this.#outOfGroupSince = undefined;
    this.#dead = undefined;
    this.#lastError = undefined;
  }

  #leftGroup(reason: string): void {
    this.#outOfGroupSince ??= this.#now();
    this.#lastError = reason;
    // The crossing into `reconnecting` is a matter of time, not of an event: logged when it happens.
    this.#reconnectingTimer ??= setTimeout(() => {
      this.#reconnectingTimer = undefined;
      const health = this.health();
      if (health.state !== 'reconnecting') return;
      this.#downLogged = true;
      this.#settings.logger.warn(
        { topic: health.topic, group: health.group, reason: health.reason, downSince: health.downSince },
        'Kafka consumer is reconnecting: out of its group longer than a join may take (the process stays ready)',
      );
    }, this.#settings.joinTimeoutMs);
    this.#reconnectingTimer.unref();
  }

  #scheduleRestart(): void {
    if (this.#closing) return;
    const { initialDelayMs, maxDelayMs } = this.#settings.restart;
    const delayMs = Math.min(maxDelayMs, initialDelayMs * 2 ** this.#restartAttempts);
    this.#restartAttempts += 1;
    this.#settings.logger.warn(
      { topic: this.#topic.name, group: this.#options.group, attempt: this.#restartAttempts, delayMs },
      'starting the Kafka consumer again after it crashed for good',
    );
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => void this.#restart(), delayMs);
    this.#restartTimer.unref();
  }

  async #restart(): Promise<void> {
    if (this.#closing) return;
    const crashed = this.#consumer;
    // kafkajs disconnected it when it crashed; again here in case it had not finished.
    await crashed?.disconnect().catch(() => undefined);
    try {
      await this.#startConsumer();
      if (this.#closing) return;
      this.#restartAttempts = 0;
      this.#settings.logger.info(
        { topic: this.#topic.name, group: this.#options.group },
        'Kafka consumer started again and joined its group',
      );
    } catch (error) {
      if (this.#closing) return;
      this.#lastError = error instanceof Error ? error.message : String(error);
      this.#dead ??= { since: this.#now() };
      this.#settings.logger.error(
        { err: error, topic: this.#topic.name, group: this.#options.group },
        'Kafka consumer could not be started again',
      );
      await this.#consumer?.disconnect().catch(() => undefined);
      this.#scheduleRestart();
    }
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
