import { randomUUID } from 'node:crypto';
import { fromJson, toJson } from '@bufbuild/protobuf';
import { StructSchema, type Struct } from '@bufbuild/protobuf/wkt';
import { defineTopic, type EventTopic } from '../../src/events/index.js';

// google.protobuf.Struct stands in for the project's event messages: a real generated schema with
// fields enough for an id, a key and a sequence number.
export interface SampleEvent {
  eventId: string;
  key: string;
  seq: number;
}

export type SampleTopic = EventTopic<typeof StructSchema>;

export function sampleEvent(fields: SampleEvent): Struct {
  return fromJson(StructSchema, { ...fields });
}

export function readSample(message: Struct): SampleEvent {
  return toJson(StructSchema, message) as unknown as SampleEvent;
}

/** A topic of its own per test, so suites sharing a broker never see each other's events. */
export function sampleTopic(label: string, runId = randomUUID().slice(0, 8)): SampleTopic {
  return defineTopic({
    name: `test.${label}.${runId}`,
    schema: StructSchema,
    key: (message) => readSample(message).key,
    eventId: (message) => readSample(message).eventId,
  });
}

/** Events spread over keys round-robin: event i has key `key-(i % keys)` and seq i. */
export function burst(count: number, keys: number, prefix = randomUUID().slice(0, 8)): Struct[] {
  return Array.from({ length: count }, (_, seq) =>
    sampleEvent({ eventId: `${prefix}-${seq}`, key: `key-${seq % keys}`, seq }),
  );
}

export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((done) => {
    resolve = done;
  });
  return { promise, resolve };
}
