import { createKeyServiceModule, generateKeyServiceSecrets } from '@svc/key-service';
import { createLogger, type EventBus, type Logger, type Store } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { runTarget } from '@svc/runtime';

// What starting a key-service needs apart from its database, with nothing from jest or @svc/testkit (whose
// index loads jest's globals), so the benchmarks can use it outside jest too.

export const silentLogger: Logger = createLogger({ service: 'gateway-test', level: 'silent' });

export const TEST_SIWE = {
  SIWE_DOMAIN: 'gateway.example.test',
  SIWE_URI: 'https://gateway.example.test/sign-in',
  CHAIN_ID: '31337',
} as const;

/** The key-service's secrets, shared by every key-service of a test run as by a deployment's replicas. */
const TEST_SECRETS = generateKeyServiceSecrets();

/** A real key-service, run by the runner as in production, on a PostgreSQL database of its own. */
export interface RunningKeyService {
  readonly address: string;
  close(): Promise<void>;
}

export interface KeyServiceOptions {
  readonly env?: Record<string, string>;
  /** The key-service's clock of sign-in checks and tokens (to issue tokens that are already expired). */
  readonly now?: () => Date;
  /** The event bus it consumes job lifecycle events from; default the runner's own embedded bus. */
  readonly bus?: EventBus;
}

/** The database a key-service runs on; `drop` runs after the key-service stopped. */
export interface KeyServiceDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

/** Runs a key-service on `database`, which it drops on close (also when the key-service fails to start). */
export async function runKeyServiceOn(
  store: Store,
  database: KeyServiceDatabase,
  options: KeyServiceOptions = {},
): Promise<RunningKeyService> {
  let running;
  try {
    running = await runTarget(
      { name: 'key-service', modules: [createKeyServiceModule({ now: options.now })] },
      {
        env: {
          ...TEST_SIWE,
          ...TEST_SECRETS,
          ...TEST_SERVICE_TOKEN_SETTINGS,
          DATABASE_URL: database.url,
          GRPC_PORT: '0',
          METRICS_PORT: '0',
          ...options.env,
        },
        provided: { store, ...(options.bus ? { bus: options.bus } : {}) },
        logger: silentLogger,
      },
    );
  } catch (error) {
    await database.drop();
    throw error;
  }
  const target = running;
  return {
    address: target.grpcAddress as string,
    async close() {
      await target.stop();
      await database.drop();
    },
  };
}
