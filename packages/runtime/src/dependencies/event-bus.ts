import {
  ConfigError,
  EmbeddedEventBus,
  jobLifecycleTopic,
  KafkaEventBus,
  keyEventsTopic,
  parseKafkaBrokers,
  type EventBus,
  type KafkaEventBusOptions,
  type KafkaTopicSettings,
  type Logger,
} from '@svc/platform';
import type { RuntimeConfig } from '../config.js';

export type EventBusSettings = Pick<
  RuntimeConfig,
  | 'KAFKA_BROKERS'
  | 'KAFKA_SSL'
  | 'KAFKA_SASL_MECHANISM'
  | 'KAFKA_SASL_USERNAME'
  | 'KAFKA_SASL_PASSWORD'
  | 'KAFKA_PUBLISH_TIMEOUT'
  | 'KAFKA_JOIN_TIMEOUT'
  | 'KAFKA_TOPIC_REPLICATION_FACTOR'
  | 'KAFKA_TOPIC_MIN_INSYNC_REPLICAS'
  | 'KAFKA_JOB_LIFECYCLE_PARTITIONS'
  | 'KAFKA_JOB_LIFECYCLE_RETENTION'
  | 'KAFKA_KEY_EVENTS_PARTITIONS'
  | 'KAFKA_KEY_EVENTS_RETENTION'
> & { readonly KAFKA_CLIENT_ID: string };

/** kafkajs when KAFKA_BROKERS is set, else the in-process bus (events stay in this process). */
export function openEventBus(settings: EventBusSettings, logger: Logger): EventBus {
  if (!settings.KAFKA_BROKERS) {
    logger.info('KAFKA_BROKERS is unset: events stay in this process (embedded bus)');
    return new EmbeddedEventBus({ logger, publishTimeoutMs: settings.KAFKA_PUBLISH_TIMEOUT });
  }
  return new KafkaEventBus(kafkaEventBusOptions(settings, logger));
}

/** The Kafka bus as the settings describe it: brokers, security, publish timeout, the product's topics. */
export function kafkaEventBusOptions(settings: EventBusSettings, logger: Logger): KafkaEventBusOptions {
  const problems: string[] = [];
  const replicationFactor = settings.KAFKA_TOPIC_REPLICATION_FACTOR;
  const minInSyncReplicas = settings.KAFKA_TOPIC_MIN_INSYNC_REPLICAS ?? Math.max(1, replicationFactor - 1);
  if (minInSyncReplicas > replicationFactor)
    problems.push(
      `KAFKA_TOPIC_MIN_INSYNC_REPLICAS (${minInSyncReplicas}) must be at most KAFKA_TOPIC_REPLICATION_FACTOR (${replicationFactor})`,
    );
  const mechanism = settings.KAFKA_SASL_MECHANISM;
  const { KAFKA_SASL_USERNAME: username, KAFKA_SASL_PASSWORD: password } = settings;
  if (mechanism !== 'none' && (!username || !password))
    problems.push(`KAFKA_SASL_MECHANISM ${mechanism} needs KAFKA_SASL_USERNAME and KAFKA_SASL_PASSWORD`);
  let brokers: string[] = [];
  try {
    brokers = parseKafkaBrokers(settings.KAFKA_BROKERS ?? '');
  } catch (error) {
    problems.push(`KAFKA_BROKERS: ${(error as Error).message}`);
  }
  if (problems.length > 0) throw new ConfigError(problems);

  const layout = (partitions: number, retentionMs: number): KafkaTopicSettings => ({
    partitions,
    replicationFactor,
    retentionMs,
    minInSyncReplicas,
  });
  return {
    brokers,
    clientId: settings.KAFKA_CLIENT_ID,
    ssl: settings.KAFKA_SSL,
    ...(mechanism === 'none'
      ? {}
      : {
          sasl: {
            mechanism,
            username: username ?? '',
            password: password ?? '',
          } as KafkaEventBusOptions['sasl'],
        }),
    publishTimeoutMs: settings.KAFKA_PUBLISH_TIMEOUT,
    joinTimeoutMs: settings.KAFKA_JOIN_TIMEOUT,
    topics: {
      [jobLifecycleTopic.name]: layout(
        settings.KAFKA_JOB_LIFECYCLE_PARTITIONS,
        settings.KAFKA_JOB_LIFECYCLE_RETENTION,
      ),
      [keyEventsTopic.name]: layout(
        settings.KAFKA_KEY_EVENTS_PARTITIONS,
        settings.KAFKA_KEY_EVENTS_RETENTION,
      ),
    },
    logger,
  };
}
