// All-in-one mode (`npm start`): every service that exists so far in one Node process, each still
// talking gRPC over loopback, sharing one embedded store and one in-process event bus unless
// REDIS_URL / KAFKA_BROKERS say otherwise. PostgreSQL is the local server (DATABASE_URL, default
// postgresql://postgres@127.0.0.1:5432/svc; the database is created when missing). The chain is a
// devnet started here (its description goes to DEVNET_FILE), or with RPC_URL the chain running there
// as DEVNET_FILE describes it (e.g. `npm run devnet` in another terminal).
import { buildGatewayApp, loadGatewayConfig } from '@svc/gateway';
import {
  applyMigrations,
  buildKeyService,
  loadKeyServiceConfig,
  loadTokenKeyRing,
  openDatabase,
} from '@svc/key-service';
import {
  createLogger,
  createServiceGrpcServer,
  EmbeddedEventBus,
  GracefulShutdown,
  keyEventsTopic,
  loadConfig,
  MemoryStore,
  RedisStore,
  serviceClientOptions,
} from '@svc/platform';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import pg from 'pg';
import { devnetConfigShape, openLocalChain } from '@svc/devnet';

const HTTP_PORT = process.env.HTTP_PORT ?? process.env.PORT ?? '8080';
const publicOrigin = process.env.PUBLIC_URL ?? `http://localhost:${HTTP_PORT}`;

async function ensureDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.slice(1));
  const maintenance = new URL(url);
  maintenance.pathname = '/postgres';
  const client = new pg.Client({ connectionString: maintenance.toString() });
  await client.connect();
  try {
    const exists = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount === 0) await client.query(`create database "${name.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
}

/** Sign-in messages must name the chain the wallets use: the devnet's, whatever CHAIN_ID says. */
function chainIdForSignIn(chainId: number): string {
  const configured = process.env.CHAIN_ID;
  if (configured !== undefined && configured !== '' && Number(configured) !== chainId) {
    throw new Error(`CHAIN_ID=${configured} but the chain in use is ${chainId}; unset CHAIN_ID`);
  }
  return String(chainId);
}

const logger = createLogger({ service: 'all-in-one', level: process.env.LOG_LEVEL ?? 'info' });
const shutdown = new GracefulShutdown({ logger });

async function main(): Promise<void> {
  shutdown.listen();

  const chain = await openLocalChain(loadConfig(devnetConfigShape), logger);
  shutdown.add('chain', () => chain.close());

  const keyConfig = loadKeyServiceConfig({
    SIWE_DOMAIN: new URL(publicOrigin).host,
    SIWE_URI: publicOrigin,
    ...process.env,
    CHAIN_ID: chainIdForSignIn(chain.description.chainId),
    GRPC_HOST: '127.0.0.1',
    GRPC_PORT: '0',
  });
  const databaseUrl = keyConfig.DATABASE_URL ?? '';
  await ensureDatabase(databaseUrl);
  await applyMigrations(databaseUrl);

  const store = process.env.REDIS_URL
    ? new RedisStore({ redis: process.env.REDIS_URL, namespace: 'svc' })
    : new MemoryStore();
  shutdown.add('store', () => store.close());
  const bus = new EmbeddedEventBus({ logger });
  shutdown.add('event bus', () => bus.close());

  const db = openDatabase({ url: databaseUrl, poolSize: 10 });
  shutdown.add('database', () => db.$disconnect());
  const tokenKeys = await loadTokenKeyRing({ signingKey: keyConfig.SIGNIN_TOKEN_SIGNING_KEY });
  const keyService = buildKeyService({
    config: keyConfig,
    db,
    store,
    bus,
    tokenKeys,
    logger: createLogger({ service: 'key-service', level: keyConfig.LOG_LEVEL }),
  });
  await keyService.start();
  shutdown.add('key-service background work', () => keyService.stop());
  const grpcServer = createServiceGrpcServer(logger).add(KeyService, keyService.handlers);
  const grpcPort = await grpcServer.listen('127.0.0.1:0');
  shutdown.add('key-service gRPC', () => grpcServer.shutdown());

  const gatewayConfig = loadGatewayConfig({
    ...process.env,
    HTTP_PORT,
    KEY_SERVICE_ADDRESS: `127.0.0.1:${grpcPort}`,
  });
  const keyClient = createClient(KeyService, gatewayConfig.KEY_SERVICE_ADDRESS, serviceClientOptions());
  shutdown.add('key-service client', () => closeClient(keyClient));
  const app = buildGatewayApp({
    config: gatewayConfig,
    keyService: keyClient,
    store,
    keyEvents: { bus, topic: keyEventsTopic },
    logger: createLogger({ service: 'gateway', level: gatewayConfig.LOG_LEVEL }),
  });
  const server = app.listen(gatewayConfig.HTTP_PORT, gatewayConfig.HTTP_HOST);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  shutdown.add('gateway HTTP', () => new Promise<void>((resolve) => server.close(() => resolve())));

  logger.info(
    {
      gateway: publicOrigin,
      keyServiceGrpc: `127.0.0.1:${grpcPort}`,
      database: new URL(databaseUrl).pathname.slice(1),
      rpcUrl: chain.description.rpcUrl,
      chainId: chain.description.chainId,
      completions: 'not_configured',
    },
    'all-in-one up: sign-in and API keys under /api on the devnet chain; /v1/chat/completions answers 503 ' +
      'not_configured (no completion backend yet: job-orchestrator and worker are not built); Ctrl-C stops',
  );
}

main().catch(async (error: unknown) => {
  logger.fatal({ err: error }, 'all-in-one failed to start');
  // Stops what did start (the devnet above all), so a failed start leaves no anvil behind.
  await shutdown.shutdown('start-up failed');
  process.exit(1);
});
