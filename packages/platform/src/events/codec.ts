import { fromBinary, toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import type { TraceHeaders } from '../tracing/index.js';
import { InvalidEventError } from './errors.js';
import type { ReceivedEvent } from './event-bus.js';
import type { EventTopic } from './topic.js';

/** Header names every record carries next to its protobuf payload. */
export const EVENT_HEADERS = {
  eventId: 'event-id',
  eventType: 'event-type',
  requestId: 'request-id',
} as const;

/** An event as it travels: key and headers in the clear (routable without decoding), message as protobuf binary. */
export interface EventRecord {
  readonly key: string;
  readonly eventId: string;
  readonly typeName: string;
  readonly requestId: string | undefined;
  /** The trace the publisher was in (W3C `traceparent`, `tracestate`), for the consumer to continue. */
  readonly trace: TraceHeaders;
  readonly payload: Uint8Array;
}

/** A record read back from a broker, where a foreign producer may have left the key or headers out. */
export interface IncomingRecord {
  readonly key: string | undefined;
  readonly eventId: string | undefined;
  readonly typeName: string | undefined;
  readonly requestId: string | undefined;
  readonly trace?: TraceHeaders;
  readonly payload: Uint8Array;
  readonly publishedAt: Date;
}

export type DecodedEvent<M> = Omit<ReceivedEvent<M>, 'attempt'>;

export function encodeEvent<Desc extends DescMessage>(
  topic: EventTopic<Desc>,
  message: MessageShape<Desc>,
  requestId: string | undefined,
  trace: TraceHeaders = {},
): EventRecord {
  const typeName = topic.schema.typeName;
  // Type-erased callers (an outbox relay, say) could hand over any message; catch it here, not in every consumer.
  if (message.$typeName !== typeName) {
    throw new InvalidEventError(
      topic.name,
      `expected a ${typeName} message, got ${String(message.$typeName)}`,
    );
  }
  const key = topic.key(message);
  const eventId = topic.eventId(message);
  if (!key) throw new InvalidEventError(topic.name, 'event key is empty');
  if (!eventId) throw new InvalidEventError(topic.name, 'event id is empty');
  return {
    key,
    eventId,
    typeName,
    requestId: requestId || undefined,
    trace,
    payload: toBinary(topic.schema, message),
  };
}

/** Parses a record of the topic; derives the key and event id from the message when the record lacks them. */
export function decodeRecord<Desc extends DescMessage>(
  topic: EventTopic<Desc>,
  record: IncomingRecord,
): DecodedEvent<MessageShape<Desc>> {
  const typeName = topic.schema.typeName;
  if (record.typeName !== undefined && record.typeName !== typeName) {
    throw new InvalidEventError(
      topic.name,
      `record holds a ${record.typeName}, the topic carries ${typeName}`,
    );
  }
  let message: MessageShape<Desc>;
  try {
    message = fromBinary(topic.schema, record.payload);
  } catch (error) {
    throw new InvalidEventError(topic.name, `payload is not a valid ${typeName}`, { cause: error });
  }
  const eventId = record.eventId || topic.eventId(message);
  if (!eventId) throw new InvalidEventError(topic.name, 'record has no event id');
  return {
    topic: topic.name,
    message,
    eventId,
    key: record.key || topic.key(message),
    typeName,
    requestId: record.requestId || undefined,
    trace: record.trace ?? {},
    publishedAt: record.publishedAt,
  };
}
