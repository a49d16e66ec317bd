import { createKeyServiceModule, generateKeyServiceSecrets } from '@svc/key-service';
import { createLogger, type Logger, type Store } from '@svc/platform';
import { runTarget } from '@svc/runtime';
import { createTestDatabase } from '@svc/testkit';

export const silentLogger: Logger = createLogger({ service: 'gateway-test', level: 'silent' });

export const TEST_SIWE = {
  SIWE_DOMAIN: 'gateway.example.test',
  SIWE_URI: 'https://gateway.example.test/sign-in',
  CHAIN_ID: '31337',
} as const;

/** The key-service's secrets, shared by every key-service of a test run as by a deployment's replicas. */
const TEST_SECRETS = generateKeyServiceSecrets();

/** A real key-service, run by the runner as in production, on a fresh PostgreSQL database of its own. */
export interface RunningKeyService {
  readonly address: string;
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
  const database = await createTestDatabase({ prefix: 'gw' });
  const running = await runTarget(
    { name: 'key-service', modules: [createKeyServiceModule({ now: options.now })] },
    {
      env: { ...TEST_SIWE, ...TEST_SECRETS, DATABASE_URL: database.url, GRPC_PORT: '0', ...options.env },
      provided: { store },
      logger: silentLogger,
    },
  );
  return {
    address: running.grpcAddress as string,
    async close() {
      await running.stop();
      await database.drop();
    },
  };
}
