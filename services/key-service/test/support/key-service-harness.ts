import { closeClient, createClient, type GrpcServer, type ServiceClient } from '@svc/proto';
import {
  createLogger,
  createServiceGrpcServer,
  EmbeddedEventBus,
  type EventBus,
  type Logger,
  type Store,
} from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { loadKeyServiceConfig, type KeyServiceConfig } from '../../src/config.js';
import { openDatabase, type PrismaClient } from '../../src/db/database.js';
import type { KeyServiceMethods } from '../../src/grpc/key-service-handlers.js';
import { buildKeyService, type KeyServiceInstance } from '../../src/service.js';
import { generateKeyServiceSecrets } from '../../src/secrets.js';
import { SignInTokens } from '../../src/signin/sign-in-tokens.js';
import type { TokenKeyRing } from '../../src/signin/token-key-ring.js';
import { parseWalletAddress } from '../../src/wallet/wallet-address.js';

export const TEST_SIWE = {
  SIWE_DOMAIN: 'keys.example.test',
  SIWE_URI: 'https://keys.example.test/sign-in',
  CHAIN_ID: '31337',
} as const;

/** The secret settings every replica of a test shares, as a deployment's replicas do. */
const TEST_SECRETS = generateKeyServiceSecrets();

export const silentLogger: Logger = createLogger({ service: 'key-service-test', level: 'silent' });

export interface HarnessOptions {
  readonly databaseUrl: string;
  readonly store: Store;
  readonly tokenKeys: TokenKeyRing;
  readonly bus?: EventBus;
  readonly env?: Record<string, string>;
  /** Start the background work (relay, sweeper, lifecycle consumer); default true. */
  readonly startBackground?: boolean;
}

/** One key-service replica serving gRPC on loopback, and a client of it. */
export interface KeyServiceReplica {
  readonly client: ServiceClient<KeyServiceMethods>;
  readonly service: KeyServiceInstance;
  readonly db: PrismaClient;
  readonly bus: EventBus;
  readonly config: KeyServiceConfig;
  /**
   * A sign-in token of this replica's for `address`, as `VerifySignIn` issues one once the wallet signed
   * its challenge (without the SIWE round trip, which signin.test.ts covers).
   */
  tokenFor(address: string): Promise<string>;
  close(): Promise<void>;
}

export async function startReplica(options: HarnessOptions): Promise<KeyServiceReplica> {
  const config = loadKeyServiceConfig({
    ...TEST_SIWE,
    ...TEST_SECRETS,
    ...TEST_SERVICE_TOKEN_SETTINGS,
    DATABASE_URL: options.databaseUrl,
    DATABASE_POOL_SIZE: '8',
    OUTBOX_POLL_INTERVAL: '200ms',
    ...options.env,
  });
  const db = openDatabase({ connection: options.databaseUrl, poolSize: config.DATABASE_POOL_SIZE });
  const ownBus = options.bus === undefined;
  const bus = options.bus ?? new EmbeddedEventBus();
  const service = buildKeyService({
    config,
    db,
    store: options.store,
    bus,
    tokenKeys: options.tokenKeys,
    logger: silentLogger,
  });
  if (options.startBackground !== false) await service.start();
  const server: GrpcServer = createServiceGrpcServer(silentLogger).add(KeyService, service.handlers);
  const port = await server.listen('127.0.0.1:0');
  const client = createClient(KeyService, `127.0.0.1:${port}`, { defaultUnaryTimeoutMs: 30_000 });
  const tokens = new SignInTokens(options.tokenKeys, {
    issuer: config.SIGNIN_TOKEN_ISSUER,
    audience: config.SIGNIN_TOKEN_AUDIENCE,
    ttlMs: config.SIGNIN_TOKEN_TTL,
  });
  return {
    client,
    service,
    db,
    bus,
    config,
    async tokenFor(address) {
      return (await tokens.issue(parseWalletAddress(address, 'address'))).token;
    },
    async close() {
      closeClient(client);
      await server.shutdown(1_000);
      await service.stop();
      if (ownBus) await bus.close();
      await db.$disconnect();
    },
  };
}
