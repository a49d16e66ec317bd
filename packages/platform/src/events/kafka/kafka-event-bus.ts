import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import kafkajs, { type Admin, type Producer } from 'kafkajs';
import { currentRequestId } from '../../logging/index.js';
import { encodeEvent } from '../codec.js';
import { silentLogger, type EventBusLogger } from '../delivery.js';
import { EventBusClosedError } from '../errors.js';
import type {
  EventBus,
  EventSubscription,
  EventToPublish,
  PublishOptions,
  SubscribeOptions,
} from '../event-bus.js';
import { resolveRetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { kafkaLogCreator } from './kafka-log.js';
import type { KafkaClient, KafkaEventBusOptions } from './kafka-options.js';
import { toKafkaMessage } from './kafka-record.js';
import { KafkaSubscription, type KafkaSubscriptionSettings } from './kafka-subscription.js';

const { Kafka, Partitioners, logLevel } = kafkajs;

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
  readonly #subscriptionSettings: KafkaSubscriptionSettings;
  readonly #subscriptions = new Set<EventSubscription>();
  readonly #pendingSends = new Set<Promise<unknown>>();
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
    };
  }

  async ensureTopics(topics: readonly EventTopic[]): Promise<void> {
    this.#assertOpen('ensureTopics');
    const admin = await this.#admin();
    const existing = new Set(await admin.listTopics());
    const missing = [...new Set(topics.map((topic) => topic.name))].filter((name) => !existing.has(name));
    if (missing.length === 0) return;
    // Resolves false (no error) when another replica created a topic first.
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((name) => ({ topic: name, ...this.#newTopics })),
    });
    this.#logger.info({ topics: missing }, 'created Kafka topics');
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
      toKafkaMessage(encodeEvent(topic, event.message, event.requestId ?? currentRequestId())),
    );
    if (messages.length === 0) return;
    const send = this.#connectProducer().then(() =>
      this.#producer.send({ topic: topic.name, acks: ACKS_ALL, messages }),
    );
    this.#pendingSends.add(send);
    try {
      await send;
    } finally {
      this.#pendingSends.delete(send);
    }
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
    };
    this.#subscriptions.add(tracked);
    // The bus may have begun closing while this consumer was joining its group.
    if (this.#closing) {
      await tracked.close();
      throw new EventBusClosedError('subscribe');
    }
    return tracked;
  }

  close(): Promise<void> {
    this.#closing ??= this.#shutDown();
    return this.#closing;
  }

  async #shutDown(): Promise<void> {
    await Promise.allSettled([...this.#subscriptions].map((subscription) => subscription.close()));
    await Promise.allSettled([...this.#pendingSends]);
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

  #assertOpen(operation: string): void {
    if (this.#closing) throw new EventBusClosedError(operation);
  }
}
