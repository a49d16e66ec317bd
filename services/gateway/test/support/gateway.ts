import { EmbeddedEventBus, type Logger, type Store } from '@svc/platform';
import { TEST_SERVICE_TOKEN_SETTINGS } from '@svc/platform/testing';
import { runTarget } from '@svc/runtime';
import { gatewayModule, type GatewayInstance } from '../../src/module.js';
import { silentLogger } from './key-service.js';

export interface RunningGateway {
  readonly baseUrl: string;
  /** The runner's metrics listener's `/metrics` URL. */
  readonly metricsUrl: string;
  close(): Promise<void>;
}

export interface GatewayOptions {
  readonly keyServiceAddress: string;
  readonly store: Store;
  readonly env?: Record<string, string>;
  readonly logger?: Logger;
}

/** One gateway replica run by the runner as in production, on loopback, calling the key-service over gRPC. */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const bus = new EmbeddedEventBus();
  const running = await runTarget(
    { name: 'gateway', modules: [gatewayModule] },
    {
      env: {
        KEY_SERVICE_ADDRESS: options.keyServiceAddress,
        HTTP_HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: '0',
        HTTP_SHUTDOWN_GRACE: '500ms',
        TRUST_PROXY: 'loopback',
        ...TEST_SERVICE_TOKEN_SETTINGS,
        ...options.env,
      },
      provided: { store: options.store, bus },
      logger: options.logger ?? silentLogger,
    },
  );
  const gateway = running.instances.get('gateway') as GatewayInstance;
  return {
    baseUrl: gateway.url,
    metricsUrl: running.metricsUrl!,
    async close() {
      await running.stop();
      await bus.close();
    },
  };
}
