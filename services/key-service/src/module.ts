import { serviceCallers } from '@svc/platform';
import { defineModule } from '@svc/runtime';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { keyServiceConfigShape } from './config.js';
import { openDatabase } from './db/database.js';
import { applyMigrations } from './db/migrate.js';
import { buildKeyService, type KeyServiceInstance } from './service.js';
import { loadTokenKeyRing } from './signin/token-key-ring.js';

export interface KeyServiceModuleOptions {
  /** The clock of sign-in checks and tokens (tests issue tokens that are already expired). */
  readonly now?: () => Date;
}

/**
 * The key-service as the runner runs it: migrates its database, loads the sign-in token keys, starts
 * its background work (outbox relay, reservation sweeper, lifecycle consumer) and serves KeyService
 * on the process's gRPC server.
 */
export function createKeyServiceModule(options: KeyServiceModuleOptions = {}) {
  return defineModule({
    name: 'key-service',
    configShape: keyServiceConfigShape,
    needs: ['database', 'store', 'bus', 'grpc', 'metrics'],
    build(config, { database, store, bus, grpc, metrics, logger }) {
      // The client connects on its first query, after the migrations.
      const db = openDatabase({
        connection: database,
        poolSize: config.DATABASE_POOL_SIZE,
        onConnectionError: (error) => logger.warn({ err: error }, 'postgres connection error'),
      });
      let service: KeyServiceInstance | undefined;
      return {
        async start() {
          if (config.RUN_MIGRATIONS) {
            logger.info(await applyMigrations(database), 'database migrations checked');
          }
          // Importing (or generating) the token keys is asynchronous (WebCrypto): the service that signs
          // with them is built once they are loaded.
          const tokenKeys = await loadTokenKeyRing({
            signingKey: config.SIGNIN_TOKEN_SIGNING_KEY,
            signingKeyId: config.SIGNIN_TOKEN_SIGNING_KEY_ID,
            verificationKeys: config.SIGNIN_TOKEN_VERIFICATION_KEYS,
          });
          service = buildKeyService({
            config,
            db,
            store,
            bus,
            tokenKeys,
            logger,
            metrics,
            now: options.now,
          });
          await service.start();
          grpc.add(KeyService, service.handlers, {
            authenticate: serviceCallers(config, { service: 'key-service', grpcService: KeyService }),
          });
          logger.info({ signingKeyId: tokenKeys.signing.kid }, 'key-service serving');
        },
        async stop() {
          await service?.stop();
          await db.$disconnect();
        },
      };
    },
  });
}

export const keyServiceModule = createKeyServiceModule();
