import type { AddressInfo } from 'node:net';
import { serviceClientOptions, type Logger, type Store } from '@svc/platform';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { loadGatewayConfig } from '../../src/config.js';
import { buildGatewayApp } from '../../src/service.js';
import { silentLogger } from './key-service.js';

export interface RunningGateway {
  readonly baseUrl: string;
  close(): Promise<void>;
}

export interface GatewayOptions {
  readonly keyServiceAddress: string;
  readonly store: Store;
  readonly env?: Record<string, string>;
  readonly logger?: Logger;
}

/** One gateway replica listening on loopback, calling the key-service over gRPC. */
export async function startGateway(options: GatewayOptions): Promise<RunningGateway> {
  const config = loadGatewayConfig({ KEY_SERVICE_ADDRESS: options.keyServiceAddress, ...options.env });
  const keyService = createClient(
    KeyService,
    options.keyServiceAddress,
    serviceClientOptions({ defaultUnaryTimeoutMs: config.KEY_SERVICE_TIMEOUT }),
  );
  const app = buildGatewayApp({
    config,
    keyService,
    store: options.store,
    logger: options.logger ?? silentLogger,
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      closeClient(keyService);
    },
  };
}
