import type { DescMessage, MessageShape } from '@bufbuild/protobuf';
import type { TraceHeaders } from '../tracing/index.js';
import type { EventTopic } from './topic.js';

/** One event as a consumer receives it. */
export interface ReceivedEvent<M> {
  readonly topic: string;
  readonly message: M;
  readonly eventId: string;
  readonly key: string;
  /** Fully qualified protobuf type name of `message`. */
  readonly typeName: string;
  /** The request that caused the event, for log correlation; handlers run inside its request context. */
  readonly requestId: string | undefined;
  /** The trace the publisher was in; the handler runs in a span that continues it. */
  readonly trace?: TraceHeaders;
  readonly publishedAt: Date;
  /** 1 on the first delivery to this consumer, counting up while the handler keeps failing. */
  readonly attempt: number;
}

/**
 * Handles one event. Resolving acknowledges it; throwing makes the bus retry the same event (with a
 * bounded backoff) before any later event of its key. Delivery is at-least-once: be idempotent.
 */
export type EventHandler<M> = (event: ReceivedEvent<M>) => Promise<void>;

export interface PublishOptions {
  /** Defaults to the request id of the current request context. */
  readonly requestId?: string;
  /** The trace the event belongs to; defaults to the current span's. */
  readonly trace?: TraceHeaders;
}

export interface EventToPublish<Desc extends DescMessage> extends PublishOptions {
  readonly message: MessageShape<Desc>;
}

export interface SubscribeOptions<Desc extends DescMessage> {
  /** Consumer group: each live group receives every event once; members of one group share the work. */
  readonly group: string;
  readonly handler: EventHandler<MessageShape<Desc>>;
  /**
   * Where a group that has never consumed this topic starts: at the oldest retained event (true), or
   * at the end of the topic as of `subscribe` (false, the default). A group with progress resumes where
   * it left off either way.
   */
  readonly fromBeginning?: boolean;
}

/**
 * What one subscription's consumer is doing:
 * - `live`: consuming (a rebalance or a restart kafkajs recovers from by itself stays live);
 * - `reconnecting`: out of its group longer than a join may take while the bus keeps trying (the brokers
 *   unreachable, no group coordinator): a state of the cluster, which every replica shares;
 * - `dead`: crashed with an error the client will not restart from (an authorization failure, a topic
 *   gone, a bug): this process's consumer, started again with a backoff until one joins.
 */
export type SubscriptionState = 'live' | 'reconnecting' | 'dead';

/** Whether one subscription's consumer is consuming, as readiness and metrics see it. */
export interface SubscriptionHealth {
  readonly topic: string;
  readonly group: string;
  readonly state: SubscriptionState;
  /** `state === 'live'`: the one number a gauge needs (events are reaching the handler). */
  readonly live: boolean;
  /** Why it is not live, from the consumer's last error; undefined while live. */
  readonly reason?: string;
  /** Since when it has not been live (when it left its group, or crashed). */
  readonly downSince?: Date;
}

export interface EventSubscription {
  /**
   * Stops delivery to this consumer. Resolves once its in-flight handler (if any) has settled; an event
   * it had not acknowledged goes to the next member of the group.
   */
  close(): Promise<void>;
  /** This consumer's health now (cheap, synchronous: readiness and the key cache poll it). */
  health(): SubscriptionHealth;
}

/** Publish/subscribe of typed events, the port every service uses (Kafka or in-process behind it). */
export interface EventBus {
  /** Creates the topics that do not exist yet; brokers are not assumed to auto-create them. */
  ensureTopics(topics: readonly EventTopic[]): Promise<void>;
  /**
   * Resolves once the broker has acknowledged the event (at-least-once: it will be delivered). Rejects
   * with `PublishTimeoutError` when no acknowledgement came within the bus's publish timeout, which on
   * Kafka includes waiting for the topic's previous send to settle (sends of a topic go one at a time).
   */
  publish<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    message: MessageShape<Desc>,
    options?: PublishOptions,
  ): Promise<void>;
  /**
   * Publishes events in order, acknowledged together; per-key order follows the array order. Rejects
   * with `PublishTimeoutError` like `publish`.
   */
  publishBatch<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    events: readonly EventToPublish<Desc>[],
  ): Promise<void>;
  /**
   * Starts consuming. Resolves once the consumer is live: every event published after that reaches
   * the group.
   */
  subscribe<Desc extends DescMessage>(
    topic: EventTopic<Desc>,
    options: SubscribeOptions<Desc>,
  ): Promise<EventSubscription>;
  /**
   * The health of every open subscription (closed ones drop out). The runner's readiness takes a
   * process out of rotation while one is `dead` (see @svc/runtime); `reconnecting` is logged, not unready.
   */
  health(): readonly SubscriptionHealth[];
  /** Closes every subscription (waiting for in-flight handlers) and the producer. */
  close(): Promise<void>;
}
