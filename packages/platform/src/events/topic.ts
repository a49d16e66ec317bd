import type { DescMessage, MessageShape } from '@bufbuild/protobuf';

/** What a producer and every consumer of one topic agree on. */
export interface EventTopicDefinition<Desc extends DescMessage> {
  /** Kafka topic name: letters, digits, `.`, `_`, `-`; at most 249 characters. */
  readonly name: string;
  /** The protobuf-es message schema every event on the topic uses. */
  readonly schema: Desc;
  /** The id that orders events: events with one key are delivered in publish order. */
  key(message: MessageShape<Desc>): string;
  /** The id consumers deduplicate by; the same event published twice carries the same id. */
  eventId(message: MessageShape<Desc>): string;
}

/** A validated, frozen topic definition; the only way to publish or subscribe. */
export type EventTopic<Desc extends DescMessage = DescMessage> = Readonly<EventTopicDefinition<Desc>>;

/** The message type carried by a topic. */
export type TopicMessage<T> = T extends EventTopic<infer Desc> ? MessageShape<Desc> : never;

// Kafka's own rule (kafka.common.internals.Topic): legal characters and length.
const TOPIC_NAME = /^[a-zA-Z0-9._-]{1,249}$/;

export function defineTopic<Desc extends DescMessage>(
  definition: EventTopicDefinition<Desc>,
): EventTopic<Desc> {
  const { name, schema } = definition;
  if (!TOPIC_NAME.test(name) || name === '.' || name === '..') {
    throw new TypeError(`invalid topic name ${JSON.stringify(name)}: use 1-249 of [a-zA-Z0-9._-]`);
  }
  if (schema.kind !== 'message') throw new TypeError(`topic ${name}: schema must be a message descriptor`);
  return Object.freeze({
    name,
    schema,
    key: (message: MessageShape<Desc>) => definition.key(message),
    eventId: (message: MessageShape<Desc>) => definition.eventId(message),
  });
}
