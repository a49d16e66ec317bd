import type { Admin, Consumer, KafkaConfig, Producer, ProducerConfig, ConsumerConfig } from 'kafkajs';
import type { EventBusLogger } from '../delivery.js';
import type { RetryPolicy } from '../retry-policy.js';

/** The part of a kafkajs `Kafka` client the bus uses (tests hand in a fake). */
export interface KafkaClient {
  producer(config?: ProducerConfig): Producer;
  consumer(config: ConsumerConfig): Consumer;
  admin(): Admin;
}

export interface KafkaEventBusOptions {
  /** `host:port` of one or more brokers. */
  readonly brokers: readonly string[];
  readonly clientId: string;
  /** Passed to kafkajs as is (`true`, or TLS options such as a CA). */
  readonly ssl?: KafkaConfig['ssl'];
  /** Passed to kafkajs as is (plain, scram-sha-256/512, aws, oauthbearer). */
  readonly sasl?: KafkaConfig['sasl'];
  readonly connectionTimeoutMs?: number;
  readonly requestTimeoutMs?: number;
  /** How `ensureTopics` creates a topic; -1 (the default) takes the broker's default. */
  readonly newTopics?: { readonly numPartitions?: number; readonly replicationFactor?: number };
  /** Backoff between attempts of a failing handler. */
  readonly handlerRetry?: Partial<RetryPolicy>;
  /** Partitions one consumer handles at once (each still strictly in order). Default 4. */
  readonly partitionsConsumedConcurrently?: number;
  /** Kafka consumer session timeout. Default 30 s. */
  readonly sessionTimeoutMs?: number;
  /** How long `subscribe` waits for the consumer to join its group. Default 60 s. */
  readonly joinTimeoutMs?: number;
  readonly logger?: EventBusLogger;
  /** A ready client instead of one built from the options above. */
  readonly client?: KafkaClient;
}

/** Parses `KAFKA_BROKERS`-style text: comma-separated `host:port` entries. */
export function parseKafkaBrokers(text: string): string[] {
  const brokers = text
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
  if (brokers.length === 0) throw new TypeError('no Kafka broker given: expected host:port[,host:port...]');
  for (const broker of brokers) {
    const match = /^(\[[0-9a-fA-F:]+\]|[^\s:/[\]]+):(\d{1,5})$/.exec(broker);
    const port = Number(match?.[2]);
    if (!match || port < 1 || port > 65_535)
      throw new TypeError(`invalid Kafka broker "${broker}": expected host:port`);
  }
  return brokers;
}
