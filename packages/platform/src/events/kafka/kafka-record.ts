import type { IHeaders, KafkaMessage, Message } from 'kafkajs';
import { EVENT_HEADERS, type EventRecord, type IncomingRecord } from '../codec.js';
import { TRACE_HEADERS, type TraceHeaders } from '../../tracing/index.js';
import { InvalidEventError } from '../errors.js';

/** The Kafka record of an event: the event key is the record key, so the partitioner keeps a key on one partition. */
export function toKafkaMessage(record: EventRecord): Message {
  const headers: IHeaders = {
    [EVENT_HEADERS.eventId]: record.eventId,
    [EVENT_HEADERS.eventType]: record.typeName,
  };
  if (record.requestId) headers[EVENT_HEADERS.requestId] = record.requestId;
  for (const name of TRACE_HEADERS) if (record.trace[name]) headers[name] = record.trace[name];
  const { payload } = record;
  return {
    key: record.key,
    value: Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
    headers,
  };
}

export function fromKafkaMessage(topic: string, message: KafkaMessage): IncomingRecord {
  // A null value is a tombstone (compaction marker), which no event topic publishes.
  if (message.value === null)
    throw new InvalidEventError(topic, `record at offset ${message.offset} has no value`);
  const headers = message.headers ?? {};
  return {
    key: message.key?.toString('utf8') || undefined,
    eventId: headerText(headers, EVENT_HEADERS.eventId),
    typeName: headerText(headers, EVENT_HEADERS.eventType),
    requestId: headerText(headers, EVENT_HEADERS.requestId),
    trace: traceOf(headers),
    payload: message.value,
    publishedAt: new Date(Number(message.timestamp)),
  };
}

function traceOf(headers: IHeaders): TraceHeaders {
  const trace: TraceHeaders = {};
  for (const name of TRACE_HEADERS) {
    const value = headerText(headers, name);
    if (value) trace[name] = value;
  }
  return trace;
}

// Kafka allows a header to repeat; the first value is the one the producer set.
function headerText(headers: IHeaders, name: string): string | undefined {
  const raw = headers[name];
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (value === undefined) return undefined;
  return (typeof value === 'string' ? value : value.toString('utf8')) || undefined;
}
