import type { AddressInfo } from 'node:net';
import {
  type EventBus,
  keyEventsTopic,
  type Logger,
  serviceClientOptions,
  ServiceIdentity,
  type Store,
} from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { loadGatewayConfig } from '../../../src/config.js';
import type { KeyServiceClient } from '../../../src/key-service-client.js';
import { buildGatewayApp, buildLimitHitReporter } from '../../../src/service.js';
import type { CompletionBackend } from '../../../src/v1/completion-backend.js';
import type { PaymentSettlerPort } from '../../../src/v1/per-call/payment-settler-port.js';
import { silentLogger } from '../../support/key-service-target.js';

export interface V1Gateway {
  readonly baseUrl: string;
  /** Calls this replica made to the key-service, by method name. */
  readonly keyServiceCalls: Map<string, number>;
  close(): Promise<void>;
}

export interface V1GatewayOptions {
  readonly keyServiceAddress: string;
  readonly store: Store;
  readonly env?: Record<string, string>;
  readonly completions?: CompletionBackend;
  /** Takes per-call payments; without one the replica takes none. */
  readonly settler?: PaymentSettlerPort;
  readonly bus?: EventBus;
  readonly logger?: Logger;
}

/** Counts every call made through a key-service client, so tests can tell a warm path made none. */
function countingClient(client: KeyServiceClient, calls: Map<string, number>): KeyServiceClient {
  return new Proxy(client, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof property !== 'string' || typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        calls.set(property, (calls.get(property) ?? 0) + 1);
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

/** One gateway replica on loopback with the `/v1` ports a test chooses. */
export async function startV1Gateway(options: V1GatewayOptions): Promise<V1Gateway> {
  const config = loadGatewayConfig({
    KEY_SERVICE_ADDRESS: options.keyServiceAddress,
    // Tests name their client's address in X-Forwarded-For from loopback.
    TRUST_PROXY: 'loopback',
    // Counted refusals show in listings within a test's patience.
    V1_LIMIT_HIT_FLUSH_INTERVAL: '100ms',
    ...TEST_SERVICE_TOKEN_SETTINGS,
    ...options.env,
  });
  const client = createClient(
    KeyService,
    options.keyServiceAddress,
    serviceClientOptions({
      identity: new ServiceIdentity('gateway', config.SERVICE_TOKEN_PRIVATE_KEY),
      audience: 'key-service',
      defaultUnaryTimeoutMs: config.KEY_SERVICE_TIMEOUT,
    }),
  );
  const keyServiceCalls = new Map<string, number>();
  const keyService = countingClient(client, keyServiceCalls);
  const logger = options.logger ?? silentLogger;
  const limitHits = buildLimitHitReporter({ config, keyService, store: options.store, logger });
  limitHits.start();
  const app = buildGatewayApp({
    config,
    keyService,
    store: options.store,
    logger,
    limitHits,
    completions: options.completions,
    settler: options.settler,
    keyEvents: options.bus ? { bus: options.bus, topic: keyEventsTopic } : undefined,
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    keyServiceCalls,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await limitHits.stop();
      closeClient(client);
    },
  };
}
