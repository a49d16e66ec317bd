import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import kafkajs, { type Admin, type Producer } from 'kafkajs';
import { currentRequestId } from '../../logging/index.js';
import { currentTraceHeaders } from '../../tracing/index.js';
import { waitAtMost } from '../../lifecycle/wait-at-most.js';
import { encodeEvent } from '../codec.js';
import { silentLogger, type EventBusLogger } from '../delivery.js';
import { EventBusClosedError } from '../errors.js';
import type {
  EventBus,
  EventSubscription,
  EventToPublish,
  PublishOptions,
  SubscribeOptions,
  SubscriptionHealth,
} from '../event-bus.js';
import { resolvePublishTimeoutMs, withPublishTimeout } from '../publish-timeout.js';
import { resolveRetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { kafkaLogCreator } from './kafka-log.js';
import {
  kafkaTopicConfig,
  sendOrderWaitMs,
  type KafkaClient,
  type KafkaEventBusOptions,
  type KafkaTopicSettings,
} from './kafka-options.js';
import { toKafkaMessage } from './kafka-record.js';
import { KafkaSubscription, type KafkaSubscriptionSettings } from './kafka-subscription.js';

const { Kafka, Partitioners, logLevel, ConfigResourceTypes } = kafkajs;

/** Wait for every in-sync replica: an acknowledged event survives the loss of the partition leader. */
const ACKS_ALL = -1;

/**
 * The event bus over Kafka (kafkajs). Publishing uses an idempotent producer (broker-side dedupe of
 * producer retries, one request in flight so retries cannot reorder a key) and resolves on the
 * acknowledgement of all in-sync replicas. Consumers commit an offset only after its handler succeeded.
 */
export class KafkaEventBus implements EventBus {
  readonly #client: KafkaClient;
  readonly #producer: Producer;
  readonly #logger: EventBusLogger;
  readonly #newTopics: { numPartitions: number; replicationFactor: number };
  readonly #topics: ReadonlyMap<string, KafkaTopicSettings>;
  readonly #publishTimeoutMs: number;
  /** How long a topic's next send waits for a started send that has not settled (see #sendInTurn). */
  readonly #sendOrderWaitMs: number;
  readonly #subscriptionSettings: KafkaSubscriptionSettings;
  readonly #subscriptions = new Map<EventSubscription, KafkaSubscription>();
  /**
   * Every send until it settles, including those whose publish timed out (kafkajs still retries them),
   * and every queued send whose publisher still waits for it.
   */
  readonly #pendingSends = new Set<Promise<void>>();
  /** Per topic, when the latest send lets the next one start (see #sendInTurn). */
  readonly #turnAfter = new Map<string, Promise<void>>();
  #producerConnection: Promise<void> | undefined;
  #adminConnection: Promise<Admin> | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: KafkaEventBusOptions) {
    this.#logger = options.logger ?? silentLogger;
    this.#client =
      options.client ??
      new Kafka({
        clientId: options.clientId,
        brokers: [...options.brokers],
        ssl: options.ssl,
        sasl: options.sasl,
        connectionTimeout: options.connectionTimeoutMs,
        requestTimeout: options.requestTimeoutMs,
        ...(options.maxRetryTimeMs === undefined ? {} : { retry: { maxRetryTime: options.maxRetryTimeMs } }),
        logLevel: logLevel.INFO,
        logCreator: kafkaLogCreator(this.#logger),
      });
    this.#producer = this.#client.producer({
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: false,
      // The Java client's murmur2 partitioner, named explicitly so kafkajs does not warn about its default.
      createPartitioner: Partitioners.DefaultPartitioner,
    });
    const sessionTimeoutMs = options.sessionTimeoutMs ?? 30_000;
    this.#newTopics = {
      numPartitions: options.newTopics?.numPartitions ?? -1,
      replicationFactor: options.newTopics?.replicationFactor ?? -1,
    };
    this.#topics = new Map(
      Object.entries(options.topics ?? {}).map(([name, settings]) => [
        name,
        validTopicSettings(name, settings),
      ]),
    );
    this.#publishTimeoutMs = resolvePublishTimeoutMs(options.publishTimeoutMs);
    this.#sendOrderWaitMs = sendOrderWaitMs({
      publishTimeoutMs: this.#publishTimeoutMs,
      requestTimeoutMs: options.requestTimeoutMs,
      maxRetryTimeMs: options.maxRetryTimeMs,
    });
    this.#subscriptionSettings = {
      client: this.#client,
      admin: () => this.#admin(),
      retry: resolveRetryPolicy(options.handlerRetry),
      logger: this.#logger,
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 4,
      sessionTimeoutMs,
      // kafkajs's default, but never above a third of the session timeout (Kafka's rule of thumb).
      heartbeatIntervalMs: Math.max(1, Math.min(3_000, Math.floor(sessionTimeoutMs / 3))),
      joinTimeoutMs: options.joinTimeoutMs ?? 60_000,
      restart: {
        initialDelayMs: options.consumerRestart?.initialDelayMs ?? 1_000,
        maxDelayMs: options.consumerRestart?.maxDelayMs ?? 30_000,
      },
    };
  }

  async ensureTopics(topics: readonly EventTopic[]): Promise<void> {
    this.#assertOpen('ensureTopics');
    const admin = await this.#admin();
    const names = [...new Set(topics.map((topic) => topic.name))];
    const existing = new Set(await admin.listTopics());
    const missing = names.filter((name) => !existing.has(name));
    if (missing.length > 0) {
      // Resolves false (no error) when another replica created a topic first.
      await admin.createTopics({
        waitForLeaders: true,
        topics: missing.map((name) => {
          const settings = this.#topics.get(name);
          return settings ? kafkaTopicConfig(name, settings) : { topic: name, ...this.#newTopics };
        }),
      });
      this.#logger.info(
        { topics: missing.map((name) => ({ name, ...this.#topics.get(name) })) },
        'created Kafka topics',
      );
    }
    const checked = names.filter((name) => existing.has(name) && this.#topics.has(name));
    if (checked.length > 0) await this.#warnOfLayoutDrift(admin, checked);
  }

  publish<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    message: MessageShape<Desc>,
    options: PublishOptions = {},
  ): Promise<void> {
    return this.publishBatch(topic, [{ message, ...options }]);
  }

  async publishBatch<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    events: readonly EventToPublish<Desc>[],
  ): Promise<void> {
    this.#assertOpen('publish');
    const messages = events.map((event) =>
      toKafkaMessage(
        encodeEvent(
          topic,
          event.message,
          event.requestId ?? currentRequestId(),
          event.trace ?? currentTraceHeaders(),
        ),
      ),
    );
    if (messages.length === 0) return;
    const send = this.#sendInTurn(topic.name, messages.length, () =>
      this.#connectProducer().then(() =>
        this.#producer.send({ topic: topic.name, acks: ACKS_ALL, messages }),
      ),
    );
    // The timeout counts from here, the wait for the topic's earlier send included. kafkajs keeps
    // retrying an unreachable broker for a long while: the caller hears within the timeout, while a send
    // that started goes on (tracked until it settles); one still queued is dropped (see #sendInTurn).
    await withPublishTimeout(send.outcome, {
      topic: topic.name,
      events: messages.length,
      timeoutMs: this.#publishTimeoutMs,
      onTimeout: send.abandon,
    });
  }

  /**
   * Runs the topic's sends one at a time: `send` starts once the topic's previous send has settled, even
   * one whose publish already timed out, so a caller's retry never overtakes the attempt it repeats and
   * a topic's events land in the order they were published, a repeat after its original.
   *
   * Two bounds keep an outage from piling sends up behind one that kafkajs is still retrying:
   * - a send whose publisher gave up (`abandon`, on its timeout) before its turn came is skipped: nothing
   *   was sent, the publisher retries or falls back. Only sends that started are ever waited for.
   * - a started send holds the topic's next send for at most `#sendOrderWaitMs` from its start; then
   *   the next one goes (logged as a warning), and the stuck one may land after it.
   *
   * A send is tracked until it settles (a queued one until its publisher gives up), which `close()`
   * waits for.
   */
  #sendInTurn(
    topic: string,
    events: number,
    send: () => Promise<unknown>,
  ): { outcome: Promise<unknown>; abandon: () => void } {
    const previous = this.#turnAfter.get(topic) ?? Promise.resolve();
    let passTurn!: () => void;
    const turnPassed = new Promise<void>((resolve) => (passTurn = resolve));
    this.#turnAfter.set(topic, turnPassed);
    void turnPassed.then(() => {
      if (this.#turnAfter.get(topic) === turnPassed) this.#turnAfter.delete(topic);
    });

    let started = false;
    let abandoned = false;
    const outcome = previous.then(() => {
      if (abandoned) {
        passTurn();
        return undefined;
      }
      started = true;
      const startedAt = Date.now();
      const sending = (async () => send())();
      const orderWait = setTimeout(() => {
        this.#logger.warn(
          { topic, events, pendingMs: Date.now() - startedAt },
          "Kafka send still unacknowledged: the topic's later publishes no longer wait for it (kafkajs keeps retrying it; its events may land after theirs)",
        );
        passTurn();
      }, this.#sendOrderWaitMs);
      orderWait.unref();
      const settle = (): void => {
        clearTimeout(orderWait);
        passTurn();
      };
      sending.then(settle, settle);
      return sending;
    });
    const tracked = outcome.then(
      () => undefined,
      () => undefined,
    );
    this.#pendingSends.add(tracked);
    void tracked.then(() => this.#pendingSends.delete(tracked));
    const abandon = (): void => {
      if (started) return;
      abandoned = true;
      this.#pendingSends.delete(tracked);
    };
    return { outcome, abandon };
  }

  async subscribe<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
  ): Promise<EventSubscription> {
    this.#assertOpen('subscribe');
    if (!options.group) throw new TypeError(`subscribe to ${topic.name}: group must not be empty`);
    const subscription = await KafkaSubscription.start(topic, options, this.#subscriptionSettings);
    const tracked: EventSubscription = {
      close: () => subscription.close().finally(() => this.#subscriptions.delete(tracked)),
      health: () => subscription.health(),
    };
    this.#subscriptions.set(tracked, subscription);
    // The bus may have begun closing while this consumer was joining its group.
    if (this.#closing) {
      await tracked.close();
      throw new EventBusClosedError('subscribe');
    }
    return tracked;
  }

  health(): SubscriptionHealth[] {
    return [...this.#subscriptions.values()].map((subscription) => subscription.health());
  }

  close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    await Promise.allSettled([...this.#subscriptions.keys()].map((subscription) => subscription.close()));
    // Sends whose publish timed out may still land: waited for (with the queued sends whose publishers
    // still wait), up to one more publish timeout, so a stopping process does not cut off what the
    // brokers are about to take; the rest is cut off by the disconnect (its outcome unknown, as its
    // publisher was told). Queued sends were published before closing, so their publishers have timed out
    // by then: they are skipped, not sent to a disconnected producer.
    await waitAtMost(Promise.all([...this.#pendingSends]), this.#publishTimeoutMs);
    if (this.#producerConnection) await this.#producer.disconnect();
    if (this.#adminConnection) await (await this.#adminConnection.catch(() => undefined))?.disconnect();
  }

  #connectProducer(): Promise<void> {
    this.#producerConnection ??= this.#producer.connect().catch((error: unknown) => {
      // Forget the failed attempt so the next publish tries again.
      this.#producerConnection = undefined;
      throw error;
    });
    return this.#producerConnection;
  }

  #admin(): Promise<Admin> {
    this.#adminConnection ??= (async () => {
      const admin = this.#client.admin();
      await admin.connect();
      return admin;
    })().catch((error: unknown) => {
      this.#adminConnection = undefined;
      throw error;
    });
    return this.#adminConnection;
  }

  /**
   * Logs, as a warning, every way an existing product topic differs from its settings. Nothing is
   * changed: more partitions would move keys to other partitions (and break their order), and the
   * configs are the operator's to change (kafka-configs.sh). A check the brokers refuse (no
   * DescribeConfigs permission) is skipped.
   */
  async #warnOfLayoutDrift(admin: Admin, names: readonly string[]): Promise<void> {
    try {
      const [metadata, described] = await Promise.all([
        admin.fetchTopicMetadata({ topics: [...names] }),
        admin.describeConfigs({
          includeSynonyms: false,
          resources: names.map((name) => ({
            type: ConfigResourceTypes.TOPIC,
            name,
            configNames: ['retention.ms', 'min.insync.replicas', 'cleanup.policy'],
          })),
        }),
      ]);
      for (const name of names) {
        const wanted = this.#topics.get(name);
        if (!wanted) continue;
        const partitions = metadata.topics.find((topic) => topic.name === name)?.partitions ?? [];
        const configs = new Map(
          (described.resources.find((resource) => resource.resourceName === name)?.configEntries ?? []).map(
            (entry) => [entry.configName, entry.configValue],
          ),
        );
        const actual = {
          partitions: partitions.length,
          replicationFactor: partitions[0]?.replicas.length ?? 0,
          retentionMs: Number(configs.get('retention.ms')),
          minInSyncReplicas: Number(configs.get('min.insync.replicas')),
          cleanupPolicy: configs.get('cleanup.policy'),
        };
        const expected = { ...wanted, cleanupPolicy: 'delete' };
        const differing = (Object.keys(expected) as Array<keyof typeof expected>).filter(
          (setting) => actual[setting] !== expected[setting],
        );
        if (differing.length > 0) {
          this.#logger.warn(
            {
              topic: name,
              differing,
              actual,
              expected,
            },
            'Kafka topic exists with another layout than its settings; left as it is (change it with the Kafka tools)',
          );
        }
      }
    } catch (error) {
      this.#logger.debug(
        { err: error, topics: names },
        'could not check the layout of existing Kafka topics',
      );
    }
  }

  #assertOpen(operation: string): void {
    if (this.#closing) throw new EventBusClosedError(operation);
  }
}

function validTopicSettings(name: string, settings: KafkaTopicSettings): KafkaTopicSettings {
  const { partitions, replicationFactor, retentionMs, minInSyncReplicas } = settings;
  const valid =
    Number.isInteger(partitions) &&
    partitions >= 1 &&
    Number.isInteger(replicationFactor) &&
    replicationFactor >= 1 &&
    Number.isInteger(minInSyncReplicas) &&
    minInSyncReplicas >= 1 &&
    minInSyncReplicas <= replicationFactor &&
    Number.isInteger(retentionMs) &&
    (retentionMs === -1 || retentionMs >= 1);
  if (!valid) throw new RangeError(`invalid settings of topic ${name}: ${JSON.stringify(settings)}`);
  return Object.freeze({ ...settings });
}
