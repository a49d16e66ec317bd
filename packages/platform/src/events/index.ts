export {
  EVENT_HEADERS,
  decodeRecord,
  encodeEvent,
  type DecodedEvent,
  type EventRecord,
  type IncomingRecord,
} from './codec.js';
export { dedupeByEventId, InMemoryProcessedEventIds, type ProcessedEventIds } from './dedupe.js';
export { sleepUnlessAborted, type EventBusLogger } from './delivery.js';
export { EmbeddedEventBus, type EmbeddedEventBusOptions } from './embedded/embedded-event-bus.js';
export { EventBusClosedError, EventBusError, InvalidEventError, PublishTimeoutError } from './errors.js';
export type {
  EventBus,
  EventHandler,
  EventSubscription,
  EventToPublish,
  PublishOptions,
  ReceivedEvent,
  SubscribeOptions,
  SubscriptionHealth,
  SubscriptionState,
} from './event-bus.js';
export { KafkaEventBus } from './kafka/kafka-event-bus.js';
export {
  kafkaTopicConfig,
  parseKafkaBrokers,
  type KafkaClient,
  type KafkaEventBusOptions,
  type KafkaTopicSettings,
} from './kafka/kafka-options.js';
export { toKafkaMessage, fromKafkaMessage } from './kafka/kafka-record.js';
export { DEFAULT_PUBLISH_TIMEOUT_MS } from './publish-timeout.js';
export {
  RetriedSubscription,
  SUBSCRIBE_RETRY,
  type RetriedSubscriptionSettings,
} from './retried-subscription.js';
export { DEFAULT_RETRY_POLICY, retryDelayMs, type RetryPolicy } from './retry-policy.js';
export { defineTopic, type EventTopic, type EventTopicDefinition, type TopicMessage } from './topic.js';
export { jobLifecycleTopic, keyEventsTopic } from './product-topics.js';
