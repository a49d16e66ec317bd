import { create, toBinary } from '@bufbuild/protobuf';
import { StructSchema, TimestampSchema } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from '@jest/globals';
import {
  decodeRecord,
  defineTopic,
  encodeEvent,
  InvalidEventError,
  type IncomingRecord,
} from '../../src/events/index.js';
import { readSample, sampleEvent, sampleTopic } from './fixtures.js';

describe('defineTopic', () => {
  const definition = {
    schema: StructSchema,
    key: () => 'k',
    eventId: () => 'id',
  };

  it('accepts Kafka-legal names and rejects the rest', () => {
    expect(defineTopic({ ...definition, name: 'svc.jobs.lifecycle.v1' }).name).toBe('svc.jobs.lifecycle.v1');
    for (const name of ['', '.', '..', 'has space', 'slash/name', 'x'.repeat(250)]) {
      expect(() => defineTopic({ ...definition, name })).toThrow(TypeError);
    }
  });

  it('freezes the definition', () => {
    const topic = defineTopic({ ...definition, name: 'frozen' });
    expect(Object.isFrozen(topic)).toBe(true);
  });
});

describe('event codec', () => {
  const topic = sampleTopic('codec', 'fixed');
  const message = sampleEvent({ eventId: 'evt-1', key: 'reservation-9', seq: 7 });

  function incoming(overrides: Partial<IncomingRecord> = {}): IncomingRecord {
    const record = encodeEvent(topic, message, 'req-1');
    return { ...record, publishedAt: new Date(1_700_000_000_000), ...overrides };
  }

  it('encodes the key, event id, type name and request id next to the protobuf payload', () => {
    const record = encodeEvent(topic, message, 'req-1');
    expect(record).toEqual({
      key: 'reservation-9',
      eventId: 'evt-1',
      typeName: 'google.protobuf.Struct',
      requestId: 'req-1',
      trace: {},
      payload: toBinary(StructSchema, message),
    });
    expect(encodeEvent(topic, message, '').requestId).toBeUndefined();
  });

  it('decodes what it encoded', () => {
    const event = decodeRecord(topic, incoming());
    expect(readSample(event.message)).toEqual({ eventId: 'evt-1', key: 'reservation-9', seq: 7 });
    expect(event).toMatchObject({
      topic: topic.name,
      eventId: 'evt-1',
      key: 'reservation-9',
      typeName: 'google.protobuf.Struct',
      requestId: 'req-1',
      publishedAt: new Date(1_700_000_000_000),
    });
  });

  it('derives a missing key and event id from the message (records from producers that set no headers)', () => {
    const event = decodeRecord(topic, incoming({ key: undefined, eventId: undefined, typeName: undefined }));
    expect(event.eventId).toBe('evt-1');
    expect(event.key).toBe('reservation-9');
  });

  it('refuses a message of another type, an empty key and an empty event id', () => {
    const timestamp = create(TimestampSchema, { seconds: 1n });
    expect(() => encodeEvent(topic, timestamp as never, undefined)).toThrow(InvalidEventError);
    expect(() => encodeEvent(topic, sampleEvent({ eventId: 'e', key: '', seq: 0 }), undefined)).toThrow(
      /event key is empty/,
    );
    expect(() => encodeEvent(topic, sampleEvent({ eventId: '', key: 'k', seq: 0 }), undefined)).toThrow(
      /event id is empty/,
    );
  });

  it('refuses a record that names another type or does not parse', () => {
    expect(() => decodeRecord(topic, incoming({ typeName: 'svc.keys.v1.KeyMinted' }))).toThrow(
      /holds a svc.keys.v1.KeyMinted/,
    );
    expect(() => decodeRecord(topic, incoming({ payload: new Uint8Array([0xff, 0xff, 0xff]) }))).toThrow(
      InvalidEventError,
    );
  });
});
