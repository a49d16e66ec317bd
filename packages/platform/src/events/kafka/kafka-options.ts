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
  /** How long kafkajs waits for the answer to one request before it retries. Default 30 s (kafkajs's). */
  readonly requestTimeoutMs?: number;
  /**
   * The longest kafkajs backs off between two attempts of a request (its `retry.maxRetryTime`); the
   * idempotent producer retries a send without limit. Default 30 s (kafkajs's). With `client`, give the
   * values that client uses: they bound how long a topic's later sends wait (`sendOrderWaitMs`).
   */
  readonly maxRetryTimeMs?: number;
  /**
   * How `ensureTopics` creates a topic that `topics` does not name (tests' topics, say); -1 (the
   * default) takes the broker's default.
   */
  readonly newTopics?: { readonly numPartitions?: number; readonly replicationFactor?: number };
  /**
   * How `ensureTopics` creates each named topic (the product's, from the runner's settings). A topic
   * that exists already is left as it is; a layout that differs from this is logged as a warning.
   */
  readonly topics?: Readonly<Record<string, KafkaTopicSettings>>;
  /**
   * How long `publish` and `publishBatch` wait for the brokers' acknowledgement (connecting included,
   * and waiting behind the topic's previous send, which goes first) before they reject with
   * PublishTimeoutError; a publish that times out before its send started is never sent. Default 5 s.
   */
  readonly publishTimeoutMs?: number;
  /** Backoff between attempts of a failing handler. */
  readonly handlerRetry?: Partial<RetryPolicy>;
  /** Partitions one consumer handles at once (each still strictly in order). Default 4. */
  readonly partitionsConsumedConcurrently?: number;
  /** Kafka consumer session timeout. Default 30 s. */
  readonly sessionTimeoutMs?: number;
  /**
   * How long `subscribe` waits for the consumer to join its group; a consumer out of its group longer
   * than this reports `reconnecting`. Default 60 s.
   */
  readonly joinTimeoutMs?: number;
  /**
   * Backoff between attempts to start a fresh consumer after one crashed for good (kafkajs restarts
   * the others itself). Default 1 s, doubling, at most 30 s.
   */
  readonly consumerRestart?: { readonly initialDelayMs?: number; readonly maxDelayMs?: number };
  readonly logger?: EventBusLogger;
  /** A ready client instead of one built from the options above. */
  readonly client?: KafkaClient;
}

/** kafkajs's defaults of the settings above. */
export const KAFKAJS_REQUEST_TIMEOUT_MS = 30_000;
export const KAFKAJS_MAX_RETRY_TIME_MS = 30_000;

/**
 * How long a topic's next send waits for a send that started and has not settled: the send's own
 * publish timeout, then one more kafkajs attempt (a request timeout) after its longest backoff (65 s
 * with the defaults). A send pending that long has outlived its caller, kafkajs's longest pause between
 * attempts and one more attempt; kafkajs goes on retrying it, but waiting longer would only stall the
 * topic's later publishes.
 */
export function sendOrderWaitMs(options: {
  readonly publishTimeoutMs: number;
  readonly requestTimeoutMs?: number | undefined;
  readonly maxRetryTimeMs?: number | undefined;
}): number {
  const requestTimeoutMs =
    positiveInteger('requestTimeoutMs', options.requestTimeoutMs) ?? KAFKAJS_REQUEST_TIMEOUT_MS;
  const maxRetryTimeMs =
    positiveInteger('maxRetryTimeMs', options.maxRetryTimeMs) ?? KAFKAJS_MAX_RETRY_TIME_MS;
  return options.publishTimeoutMs + maxRetryTimeMs + requestTimeoutMs;
}

function positiveInteger(name: string, value: number | undefined): number | undefined {
  if (value !== undefined && (!Number.isInteger(value) || value < 1))
    throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

/**
 * How one topic is created: the partition count, the replication factor and the topic configs
 * `retention.ms`, `min.insync.replicas` and `cleanup.policy=delete` (events are a log, never compacted).
 */
export interface KafkaTopicSettings {
  /** The most members of one group that consume at once; fixed once created (more would move keys). */
  readonly partitions: number;
  readonly replicationFactor: number;
  /** How long events are kept (`retention.ms`); -1 keeps them forever. */
  readonly retentionMs: number;
  /** Replicas that must have a write before `acks: all` acknowledges it (`min.insync.replicas`). */
  readonly minInSyncReplicas: number;
}

/** The `createTopics` entry of a topic with these settings. */
export function kafkaTopicConfig(
  topic: string,
  settings: KafkaTopicSettings,
): {
  topic: string;
  numPartitions: number;
  replicationFactor: number;
  configEntries: Array<{ name: string; value: string }>;
} {
  return {
    topic,
    numPartitions: settings.partitions,
    replicationFactor: settings.replicationFactor,
    configEntries: [
      { name: 'cleanup.policy', value: 'delete' },
      { name: 'retention.ms', value: String(settings.retentionMs) },
      { name: 'min.insync.replicas', value: String(settings.minInSyncReplicas) },
    ],
  };
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
