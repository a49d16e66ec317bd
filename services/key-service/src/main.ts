import {
  createLogger,
  createServiceGrpcServer,
  EmbeddedEventBus,
  GracefulShutdown,
  KafkaEventBus,
  MemoryStore,
  parseKafkaBrokers,
  RedisStore,
  type EventBus,
  type Logger,
  type Store,
} from '@svc/platform';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { loadKeyServiceConfig, type KeyServiceConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { applyMigrations } from './db/migrate.js';
import { buildKeyService } from './service.js';
import { loadTokenKeyRing } from './signin/token-key-ring.js';

// Reads the configuration, wires the real dependencies and serves the KeyService over gRPC.

function openStore(config: KeyServiceConfig, logger: Logger): Store {
  if (!config.REDIS_URL) {
    logger.warn(
      'REDIS_URL is unset: nonces and revocation markers live in this process only (all-in-one mode)',
    );
    return new MemoryStore();
  }
  return new RedisStore({
    redis: config.REDIS_URL,
    namespace: config.STORE_NAMESPACE,
    onConnectionError: (error) => logger.warn({ err: error }, 'redis connection error'),
  });
}

function openEventBus(config: KeyServiceConfig, logger: Logger): EventBus {
  if (!config.KAFKA_BROKERS) return new EmbeddedEventBus({ logger });
  return new KafkaEventBus({
    brokers: parseKafkaBrokers(config.KAFKA_BROKERS),
    clientId: config.KAFKA_CLIENT_ID,
    logger,
  });
}

async function main(): Promise<void> {
  const config = loadKeyServiceConfig();
  const logger = createLogger({ service: 'key-service', level: config.LOG_LEVEL });
  const shutdown = new GracefulShutdown({ logger });
  shutdown.listen();

  const databaseUrl = config.DATABASE_URL ?? '';
  if (config.RUN_MIGRATIONS) {
    const report = await applyMigrations(databaseUrl);
    logger.info(report, 'database migrations checked');
  }
  const db = openDatabase({
    url: databaseUrl,
    poolSize: config.DATABASE_POOL_SIZE,
    onConnectionError: (error) => logger.warn({ err: error }, 'postgres connection error'),
  });
  shutdown.add('database', () => db.$disconnect());
  const store = openStore(config, logger);
  shutdown.add('store', () => store.close());
  const bus = openEventBus(config, logger);
  shutdown.add('event bus', () => bus.close());

  if (!config.SIGNIN_TOKEN_SIGNING_KEY) {
    logger.warn(
      'SIGNIN_TOKEN_SIGNING_KEY is unset: generated a signing key; tokens verify on this process only',
    );
  }
  const tokenKeys = await loadTokenKeyRing({
    signingKey: config.SIGNIN_TOKEN_SIGNING_KEY,
    signingKeyId: config.SIGNIN_TOKEN_SIGNING_KEY_ID,
    verificationKeys: config.SIGNIN_TOKEN_VERIFICATION_KEYS,
  });

  const service = buildKeyService({ config, db, store, bus, tokenKeys, logger });
  await service.start();
  shutdown.add('background work', () => service.stop());

  const server = createServiceGrpcServer(logger).add(KeyService, service.handlers);
  const port = await server.listen(`${config.GRPC_HOST}:${config.GRPC_PORT}`);
  shutdown.add('grpc server', () => server.shutdown());
  logger.info({ port, signingKeyId: tokenKeys.signing.kid }, 'key-service listening');
}

main().catch((error: unknown) => {
  const logger = createLogger({ service: 'key-service' });
  logger.fatal({ err: error }, 'key-service failed to start');
  process.exit(1);
});
