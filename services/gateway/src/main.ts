import type { Server } from 'node:http';
import {
  createLogger,
  GracefulShutdown,
  KafkaEventBus,
  keyEventsTopic,
  parseKafkaBrokers,
  type Logger,
  MemoryStore,
  RedisStore,
  serviceClientOptions,
  type Store,
} from '@svc/platform';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { loadGatewayConfig, type GatewayConfig } from './config.js';
import { buildGatewayApp } from './service.js';

// Reads the configuration, wires the real dependencies and serves the public HTTP API.

function openStore(config: GatewayConfig, logger: Logger): Store {
  if (!config.REDIS_URL) {
    logger.warn('REDIS_URL is unset: rate windows live in this process only (all-in-one mode)');
    return new MemoryStore();
  }
  return new RedisStore({
    redis: config.REDIS_URL,
    namespace: config.STORE_NAMESPACE,
    onConnectionError: (error) => logger.warn({ err: error }, 'redis connection error'),
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((error) => (error ? reject(error) : resolve()));
    server.closeIdleConnections();
  });
}

async function main(): Promise<void> {
  const config = loadGatewayConfig();
  const logger = createLogger({ service: 'gateway', level: config.LOG_LEVEL });
  const shutdown = new GracefulShutdown({ logger });
  shutdown.listen();

  const store = openStore(config, logger);
  shutdown.add('store', () => store.close());
  const keyService = createClient(
    KeyService,
    config.KEY_SERVICE_ADDRESS,
    serviceClientOptions({ defaultUnaryTimeoutMs: config.KEY_SERVICE_TIMEOUT }),
  );
  shutdown.add('key-service client', () => closeClient(keyService));

  const bus = config.KAFKA_BROKERS
    ? new KafkaEventBus({
        brokers: parseKafkaBrokers(config.KAFKA_BROKERS),
        clientId: config.KAFKA_CLIENT_ID,
        logger,
      })
    : undefined;
  if (bus) shutdown.add('event bus', () => bus.close());

  const keyEvents = bus ? { bus, topic: keyEventsTopic } : undefined;
  const app = buildGatewayApp({ config, keyService, store, logger, keyEvents });
  const server = app.listen(config.HTTP_PORT, config.HTTP_HOST);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  shutdown.add('http server', () => closeServer(server));
  logger.info({ address: server.address() }, 'gateway listening');
}

main().catch((error: unknown) => {
  const logger = createLogger({ service: 'gateway' });
  logger.fatal({ err: error }, 'gateway failed to start');
  process.exit(1);
});
