import { randomBytes } from 'node:crypto';
import {
  applyMigrations,
  buildKeyService,
  loadKeyServiceConfig,
  loadTokenKeyRing,
  openDatabase,
  type KeyServiceInstance,
} from '@svc/key-service';
import {
  createLogger,
  createServiceGrpcServer,
  EmbeddedEventBus,
  type Logger,
  type Store,
} from '@svc/platform';
import type { GrpcServer } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import pg from 'pg';

const SERVER_URL = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';

export const silentLogger: Logger = createLogger({ service: 'gateway-test', level: 'silent' });

export const TEST_SIWE = {
  SIWE_DOMAIN: 'gateway.example.test',
  SIWE_URI: 'https://gateway.example.test/sign-in',
  CHAIN_ID: '31337',
} as const;

function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function onMaintenanceDb(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: withDatabase(SERVER_URL, 'postgres') });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A real key-service over gRPC on loopback, on a fresh PostgreSQL database of its own. */
export interface RunningKeyService {
  readonly address: string;
  readonly service: KeyServiceInstance;
  close(): Promise<void>;
}

export interface KeyServiceOptions {
  readonly env?: Record<string, string>;
  /** The key-service's clock of sign-in checks and tokens (to issue tokens that are already expired). */
  readonly now?: () => Date;
}

export async function startKeyService(
  store: Store,
  options: KeyServiceOptions = {},
): Promise<RunningKeyService> {
  const databaseName = `gw_${randomBytes(6).toString('hex')}`;
  await onMaintenanceDb(`CREATE DATABASE ${databaseName}`);
  const databaseUrl = withDatabase(SERVER_URL, databaseName);
  await applyMigrations(databaseUrl);
  const config = loadKeyServiceConfig({ ...TEST_SIWE, DATABASE_URL: databaseUrl, ...options.env });
  const db = openDatabase({ connection: databaseUrl, poolSize: 8 });
  const bus = new EmbeddedEventBus();
  const tokenKeys = await loadTokenKeyRing({});
  const service = buildKeyService({
    config,
    db,
    store,
    bus,
    tokenKeys,
    logger: silentLogger,
    now: options.now,
  });
  await service.start();
  const server: GrpcServer = createServiceGrpcServer(silentLogger).add(KeyService, service.handlers);
  const port = await server.listen('127.0.0.1:0');
  return {
    address: `127.0.0.1:${port}`,
    service,
    async close() {
      await server.shutdown(1_000);
      await service.stop();
      await bus.close();
      await db.$disconnect();
      await onMaintenanceDb(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`);
    },
  };
}
