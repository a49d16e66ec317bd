import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { currentRequestId } from '../../logging/index.js';
import { decodeRecord, encodeEvent, type DecodedEvent } from '../codec.js';
import { deliverWithRetry, silentLogger, type EventBusLogger } from '../delivery.js';
import { EventBusClosedError, InvalidEventError } from '../errors.js';
import type {
  EventBus,
  EventHandler,
  EventSubscription,
  EventToPublish,
  PublishOptions,
  SubscribeOptions,
} from '../event-bus.js';
import { resolveRetryPolicy, type RetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { EmbeddedConsumerGroup } from './consumer-group.js';
import { PartitionedLog, type StoredEvent } from './partitioned-log.js';

export interface EmbeddedEventBusOptions {
  /** Partitions per topic: the most members of one group that work at once. Default 8. */
  readonly partitions?: number;
  /**
   * Events kept per partition (Kafka's retention, by count). A group that falls further behind skips
   * the dropped events; `fromBeginning` sees what is retained. Default 10 000.
   */
  readonly retainedEventsPerPartition?: number;
  /** Backoff between attempts of a failing handler. */
  readonly handlerRetry?: Partial<RetryPolicy>;
  readonly logger?: EventBusLogger;
}

interface TopicState {
  readonly log: PartitionedLog;
  readonly groups: Map<string, EmbeddedConsumerGroup>;
}

/**
 * The in-process event bus of the all-in-one mode: the Kafka semantics the services rely on (consumer
 * groups, per-key order, retry without loss, `fromBeginning`) over an in-memory partitioned log.
 * Events live as long as the process; publishing resolves once the event is in the log.
 */
export class EmbeddedEventBus implements EventBus {
  readonly #topics = new Map<string, TopicState>();
  readonly #subscriptions = new Set<EventSubscription>();
  readonly #partitions: number;
  readonly #retainedPerPartition: number;
  readonly #retry: RetryPolicy;
  readonly #logger: EventBusLogger;
  #closing: Promise<void> | undefined;

  constructor(options: EmbeddedEventBusOptions = {}) {
    this.#partitions = positiveInteger('partitions', options.partitions ?? 8);
    this.#retainedPerPartition = positiveInteger(
      'retainedEventsPerPartition',
      options.retainedEventsPerPartition ?? 10_000,
    );
    this.#retry = resolveRetryPolicy(options.handlerRetry);
    this.#logger = options.logger ?? silentLogger;
  }

  async ensureTopics(topics: readonly EventTopic[]): Promise<void> {
    this.#assertOpen('ensureTopics');
    for (const topic of topics) this.#topicState(topic);
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
    // Encode everything first: a batch with one bad event publishes nothing.
    const records = events.map((event) =>
      encodeEvent(topic, event.message, event.requestId ?? currentRequestId()),
    );
    const state = this.#topicState(topic);
    const publishedAt = new Date();
    const touched = new Set(records.map((record) => state.log.append(record, publishedAt)));
    for (const group of state.groups.values()) for (const partition of touched) group.notify(partition);
  }

  async subscribe<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
  ): Promise<EventSubscription> {
    this.#assertOpen('subscribe');
    const { group, handler, fromBeginning = false } = options;
    if (!group) throw new TypeError(`subscribe to ${topic.name}: group must not be empty`);
    const state = this.#topicState(topic);
    let consumerGroup = state.groups.get(group);
    if (!consumerGroup) {
      consumerGroup = new EmbeddedConsumerGroup(group, state.log, fromBeginning, this.#logger);
      state.groups.set(group, consumerGroup);
    }
    const joined = consumerGroup;
    const member = joined.join((stored, signal) => this.#consume(topic, group, handler, stored, signal));
    let closing: Promise<void> | undefined;
    const subscription: EventSubscription = {
      close: () => {
        closing ??= joined.leave(member).finally(() => this.#subscriptions.delete(subscription));
        return closing;
      },
    };
    this.#subscriptions.add(subscription);
    return subscription;
  }

  close(): Promise<void> {
    this.#closing ??= Promise.all([...this.#subscriptions].map((subscription) => subscription.close())).then(
      () => undefined,
    );
    return this.#closing;
  }

  async #consume<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    group: string,
    handler: EventHandler<MessageShape<Desc>>,
    stored: StoredEvent,
    signal: AbortSignal,
  ): Promise<boolean> {
    let event: DecodedEvent<MessageShape<Desc>>;
    try {
      event = decodeRecord(topic, { ...stored.record, publishedAt: stored.publishedAt });
    } catch (error) {
      // Retrying cannot make bytes parse; holding the partition forever would stop every other key.
      this.#logger.error(
        { err: error, topic: topic.name, group, eventId: stored.record.eventId },
        'skipping an event that cannot be decoded',
      );
      return true;
    }
    return deliverWithRetry(handler, event, { group, retry: this.#retry, logger: this.#logger, signal });
  }

  #topicState(topic: EventTopic): TopicState {
    let state = this.#topics.get(topic.name);
    if (!state) {
      const log = new PartitionedLog(topic.schema.typeName, this.#partitions, this.#retainedPerPartition);
      state = { log, groups: new Map() };
      this.#topics.set(topic.name, state);
    } else if (state.log.typeName !== topic.schema.typeName) {
      throw new InvalidEventError(
        topic.name,
        `topic already carries ${state.log.typeName}, not ${topic.schema.typeName}`,
      );
    }
    return state;
  }

  #assertOpen(operation: string): void {
    if (this.#closing) throw new EventBusClosedError(operation);
  }
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}
