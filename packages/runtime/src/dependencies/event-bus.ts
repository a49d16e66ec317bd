import {
  EmbeddedEventBus,
  KafkaEventBus,
  parseKafkaBrokers,
  type EventBus,
  type Logger,
} from '@svc/platform';

export interface EventBusSettings {
  readonly KAFKA_BROKERS: string | undefined;
  readonly KAFKA_CLIENT_ID: string;
}

/** kafkajs when KAFKA_BROKERS is set, else the in-process bus (events stay in this process). */
export function openEventBus(settings: EventBusSettings, logger: Logger): EventBus {
  if (!settings.KAFKA_BROKERS) {
    logger.info('KAFKA_BROKERS is unset: events stay in this process (embedded bus)');
    return new EmbeddedEventBus({ logger });
  }
  return new KafkaEventBus({
    brokers: parseKafkaBrokers(settings.KAFKA_BROKERS),
    clientId: settings.KAFKA_CLIENT_ID,
    logger,
  });
}
