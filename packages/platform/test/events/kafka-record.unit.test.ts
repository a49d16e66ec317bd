import { toBinary } from '@bufbuild/protobuf';
import { StructSchema } from '@bufbuild/protobuf/wkt';
import { describe, expect, it } from '@jest/globals';
import kafkajs, { type KafkaMessage, type PartitionMetadata } from 'kafkajs';
import {
  encodeEvent,
  EVENT_HEADERS,
  fromKafkaMessage,
  InvalidEventError,
  parseKafkaBrokers,
  toKafkaMessage,
} from '../../src/events/index.js';
import { sampleEvent, sampleTopic } from './fixtures.js';

const { Partitioners } = kafkajs;

const topic = sampleTopic('record', 'fixed');
const message = sampleEvent({ eventId: 'evt-42', key: 'reservation-7', seq: 1 });

type RecordBatchEntry = Extract<KafkaMessage, { size?: never }>;

/** What a broker hands a consumer for a record the producer sent. */
function asReceived(sent: ReturnType<typeof toKafkaMessage>, offset = '12'): RecordBatchEntry {
  return {
    key: Buffer.from(sent.key as string),
    value: sent.value as Buffer,
    timestamp: '1700000000000',
    attributes: 0,
    offset,
    headers: Object.fromEntries(
      Object.entries(sent.headers ?? {}).map(([name, value]) => [name, Buffer.from(value as string)]),
    ),
  };
}

describe('Kafka record mapping', () => {
  it('puts the event key in the record key and the protobuf bytes in the value', () => {
    const sent = toKafkaMessage(encodeEvent(topic, message, undefined));
    expect(sent.key).toBe('reservation-7');
    expect(Buffer.isBuffer(sent.value)).toBe(true);
    expect(new Uint8Array(sent.value as Buffer)).toEqual(toBinary(StructSchema, message));
    expect(sent.partition).toBeUndefined();
  });

  it('carries the event id, the schema type name and the request id as headers', () => {
    expect(toKafkaMessage(encodeEvent(topic, message, 'req-3')).headers).toEqual({
      'event-id': 'evt-42',
      'event-type': 'google.protobuf.Struct',
      'request-id': 'req-3',
    });
    expect(toKafkaMessage(encodeEvent(topic, message, undefined)).headers).not.toHaveProperty(
      EVENT_HEADERS.requestId,
    );
  });

  it('reads back key, headers, payload and broker timestamp from a consumed record', () => {
    const record = fromKafkaMessage(
      topic.name,
      asReceived(toKafkaMessage(encodeEvent(topic, message, 'req-3'))),
    );
    expect(record).toEqual({
      key: 'reservation-7',
      eventId: 'evt-42',
      typeName: 'google.protobuf.Struct',
      requestId: 'req-3',
      trace: {},
      payload: expect.any(Buffer),
      publishedAt: new Date(1_700_000_000_000),
    });
    expect(new Uint8Array(record.payload)).toEqual(toBinary(StructSchema, message));
  });

  it('takes the first value of a repeated header and tolerates missing headers and key', () => {
    const received = asReceived(toKafkaMessage(encodeEvent(topic, message, undefined)));
    const repeated = fromKafkaMessage(topic.name, {
      ...received,
      headers: { 'event-id': [Buffer.from('first'), Buffer.from('second')] },
    });
    expect(repeated.eventId).toBe('first');
    expect(repeated.typeName).toBeUndefined();

    const bare = fromKafkaMessage(topic.name, { ...received, key: null, headers: {} });
    expect(bare).toMatchObject({
      key: undefined,
      eventId: undefined,
      typeName: undefined,
      requestId: undefined,
    });
  });

  it('refuses a tombstone (a record without a value)', () => {
    const received = asReceived(toKafkaMessage(encodeEvent(topic, message, undefined)), '99');
    expect(() => fromKafkaMessage(topic.name, { ...received, value: null })).toThrow(InvalidEventError);
    expect(() => fromKafkaMessage(topic.name, { ...received, value: null })).toThrow(/offset 99/);
  });
});

describe('Kafka partitioning of event keys', () => {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitions = (count: number): PartitionMetadata[] =>
    Array.from({ length: count }, (_, partitionId) => ({
      partitionId,
      leader: 0,
      partitionErrorCode: 0,
      replicas: [0],
      isr: [0],
    }));
  const partitionOf = (key: string, count: number, seq = 0): number =>
    partitioner({
      topic: topic.name,
      partitionMetadata: partitions(count),
      message: toKafkaMessage(encodeEvent(topic, sampleEvent({ eventId: `e-${seq}`, key, seq }), undefined)),
    });

  it("places a key where the Java client's murmur2 partitioner does", () => {
    // murmur2 values from Apache Kafka's UtilsTest; partition = toPositive(murmur2(key)) % count.
    const javaMurmur2: Record<string, number> = {
      '21': -973932308,
      foobar: -790332482,
      'a-little-bit-long-string': -985981536,
      'a-little-bit-longer-string': -1486304829,
      abc: 479470107,
    };
    for (const [key, hash] of Object.entries(javaMurmur2)) {
      expect({ key, partition: partitionOf(key, 10_007) }).toEqual({
        key,
        partition: (hash & 0x7fffffff) % 10_007,
      });
    }
  });

  it('keeps every event of a key on one partition, whatever the payload', () => {
    const keys = Array.from({ length: 50 }, (_, i) => `0xwallet${i}`);
    for (const key of keys) {
      const placements = new Set(Array.from({ length: 10 }, (_, seq) => partitionOf(key, 12, seq)));
      expect(placements.size).toBe(1);
    }
    expect(new Set(keys.map((key) => partitionOf(key, 12))).size).toBeGreaterThan(6);
  });
});

describe('parseKafkaBrokers', () => {
  it('splits a comma-separated host:port list', () => {
    expect(parseKafkaBrokers('kafka-0:9092, kafka-1.kafka:9093,[::1]:9094')).toEqual([
      'kafka-0:9092',
      'kafka-1.kafka:9093',
      '[::1]:9094',
    ]);
  });

  it('rejects an empty list and entries without a valid port', () => {
    for (const text of ['', ' , ', 'kafka', 'kafka:0', 'kafka:70000', 'http://kafka:9092']) {
      expect(() => parseKafkaBrokers(text)).toThrow(TypeError);
    }
  });
});
