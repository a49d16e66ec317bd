import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import { currentRequestId } from '../../logging/index.js';
import { currentTraceHeaders } from '../../tracing/index.js';
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
  SubscriptionHealth,
} from '../event-bus.js';
import { resolvePublishTimeoutMs, withPublishTimeout } from '../publish-timeout.js';
import { resolveRetryPolicy, type RetryPolicy } from '../retry-policy.js';
import type { EventTopic } from '../topic.js';
import { EmbeddedConsumerGroup, type GroupMember } from './consumer-group.js';
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
  /**
   * How long a publish waits while the broker is unreachable, which only `simulateBrokerOutage` makes
   * happen here, before it rejects with PublishTimeoutError. Default 5 s.
   */
  readonly publishTimeoutMs?: number;
  readonly logger?: EventBusLogger;
}

interface TopicState {
  readonly log: PartitionedLog;
  readonly groups: Map<string, EmbeddedConsumerGroup>;
}

/** One subscription: its place in its group, or why it is out of it. */
interface SubscriptionState {
  readonly topic: string;
  readonly group: EmbeddedConsumerGroup;
  readonly consume: Parameters<EmbeddedConsumerGroup['join']>[0];
  member: GroupMember | undefined;
  down: { readonly reason: string; readonly downSince: Date } | undefined;
  closing: Promise<void> | undefined;
}

/**
 * The in-process event bus of the all-in-one mode: the Kafka semantics the services rely on (consumer
 * groups, per-key order, retry without loss, `fromBeginning`) over an in-memory partitioned log.
 * Events live as long as the process; publishing resolves once the event is in the log.
 */
export class EmbeddedEventBus implements EventBus {
  readonly #topics = new Map<string, TopicState>();
  readonly #subscriptions = new Map<EventSubscription, SubscriptionState>();
  readonly #partitions: number;
  readonly #retainedPerPartition: number;
  readonly #retry: RetryPolicy;
  readonly #publishTimeoutMs: number;
  readonly #logger: EventBusLogger;
  /** Set while a simulated outage lasts: publishes wait on it, consumers are out of their groups. */
  #outage: { readonly over: Promise<void>; readonly end: () => void; readonly since: Date } | undefined;
  #closing: Promise<void> | undefined;

  constructor(options: EmbeddedEventBusOptions = {}) {
    this.#partitions = positiveInteger('partitions', options.partitions ?? 8);
    this.#retainedPerPartition = positiveInteger(
      'retainedEventsPerPartition',
      options.retainedEventsPerPartition ?? 10_000,
    );
    this.#retry = resolveRetryPolicy(options.handlerRetry);
    this.#publishTimeoutMs = resolvePublishTimeoutMs(options.publishTimeoutMs);
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
      encodeEvent(
        topic,
        event.message,
        event.requestId ?? currentRequestId(),
        event.trace ?? currentTraceHeaders(),
      ),
    );
    const state = this.#topicState(topic);
    if (this.#outage) {
      // As a Kafka producer does: wait for the broker to come back, up to the publish timeout.
      await withPublishTimeout(this.#outage.over, {
        topic: topic.name,
        events: records.length,
        timeoutMs: this.#publishTimeoutMs,
      });
      this.#assertOpen('publish');
    }
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
    const topicState = this.#topicState(topic);
    let consumerGroup = topicState.groups.get(group);
    if (!consumerGroup) {
      consumerGroup = new EmbeddedConsumerGroup(group, topicState.log, fromBeginning, this.#logger);
      topicState.groups.set(group, consumerGroup);
    }
    const subscription: EventSubscription = {
      close: () => this.#closeSubscription(subscription),
      health: () =>
        this.#healthOf(subscription) ?? {
          topic: topic.name,
          group,
          state: 'dead',
          live: false,
          reason: 'closed',
        },
    };
    const state: SubscriptionState = {
      topic: topic.name,
      group: consumerGroup,
      consume: (stored, signal) => this.#consume(topic, group, handler, stored, signal),
      member: undefined,
      down: undefined,
      closing: undefined,
    };
    state.member = consumerGroup.join(state.consume);
    this.#subscriptions.set(subscription, state);
    return subscription;
  }

  health(): SubscriptionHealth[] {
    return [...this.#subscriptions.keys()].flatMap((subscription) => this.#healthOf(subscription) ?? []);
  }

  /**
   * For tests of what a dead consumer does to readiness: the subscription's consumer stops as a Kafka
   * consumer that crashed for good does. It leaves its group (its partitions, and an event it had not
   * acknowledged, go to the other members) and reports not live with `reason` until
   * `simulateConsumerRecovery`. Resolves once its in-flight handler has settled.
   */
  async simulateConsumerCrash(subscription: EventSubscription, reason: string): Promise<void> {
    const state = this.#stateOf(subscription);
    if (state.closing || state.down) return;
    state.down = { reason, downSince: new Date() };
    this.#logger.error({ topic: state.topic, group: state.group.name, reason }, 'simulated consumer crash');
    const member = state.member;
    state.member = undefined;
    if (member) await state.group.leave(member);
  }

  /** Ends `simulateConsumerCrash`: the consumer rejoins its group, resumes where the group is, and is live. */
  simulateConsumerRecovery(subscription: EventSubscription): void {
    const state = this.#stateOf(subscription);
    if (state.closing || !state.down) return;
    state.down = undefined;
    if (!this.#outage) state.member = state.group.join(state.consume);
  }

  /**
   * For tests of a broker outage: while `unreachable`, publishes wait as they would for an unreachable
   * broker and reject with PublishTimeoutError after the publish timeout (publishing nothing), and every
   * consumer is out of its group, `reconnecting` at once (Kafka's join timeout is not simulated). Ending
   * the outage lets the waiting publishes through and the consumers rejoin where their groups are.
   */
  simulateBrokerOutage(unreachable: boolean): void {
    if (unreachable && !this.#outage) {
      let end = (): void => undefined;
      const over = new Promise<void>((resolve) => {
        end = resolve;
      });
      this.#outage = { over, end, since: new Date() };
      this.#logger.warn('simulated broker outage: consumers are reconnecting');
      for (const state of this.#subscriptions.values()) {
        const member = state.member;
        state.member = undefined;
        if (member) void state.group.leave(member);
      }
    } else if (!unreachable && this.#outage) {
      this.#outage.end();
      this.#outage = undefined;
      this.#logger.info('simulated broker outage over: consumers are live again');
      for (const state of this.#subscriptions.values())
        if (!state.closing && !state.down) state.member = state.group.join(state.consume);
    }
  }

  close(): Promise<void> {
    this.#closing ??= Promise.all(
      [...this.#subscriptions.keys()].map((subscription) => subscription.close()),
    ).then(() => undefined);
    return this.#closing;
  }

  #closeSubscription(subscription: EventSubscription): Promise<void> {
    const state = this.#subscriptions.get(subscription);
    if (!state) return Promise.resolve();
    state.closing ??= (async () => {
      const member = state.member;
      state.member = undefined;
      if (member) await state.group.leave(member);
      this.#subscriptions.delete(subscription);
    })();
    return state.closing;
  }

  #healthOf(subscription: EventSubscription): SubscriptionHealth | undefined {
    const state = this.#subscriptions.get(subscription);
    if (!state || state.closing) return undefined;
    const { topic, group, down } = state;
    if (down) return { topic, group: group.name, state: 'dead', live: false, ...down };
    if (this.#outage)
      return {
        topic,
        group: group.name,
        state: 'reconnecting',
        live: false,
        reason: 'the brokers cannot be reached (simulated outage)',
        downSince: this.#outage.since,
      };
    return { topic, group: group.name, state: 'live', live: true };
  }

  #stateOf(subscription: EventSubscription): SubscriptionState {
    const state = this.#subscriptions.get(subscription);
    if (!state) throw new TypeError('not an open subscription of this bus');
    return state;
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
