import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { keyEventsTopic, serviceClientOptions } from '@svc/platform';
import { closeClient, createClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { defineModule, type ServiceInstance } from '@svc/runtime';
import { gatewayConfigShape } from './config.js';
import { createHttpServer } from './http/http-server.js';
import type { KeyServiceClient } from './key-service-client.js';
import { buildGatewayApp, buildLimitHitReporter } from './service.js';
import type { LimitHitReporter } from './v1/limit-hit-reporter.js';

/** A running gateway; `url` is where it listens (PORT 0 picks a free port). */
export interface GatewayInstance extends ServiceInstance {
  readonly url: string;
}

/** The gateway as the runner runs it: the public HTTP server over the key-service's gRPC API. */
export const gatewayModule = defineModule({
  name: 'gateway',
  configShape: gatewayConfigShape,
  needs: ['store', 'bus'],
  peers: { KEY_SERVICE_ADDRESS: 'key-service' },
  build(config, { store, bus, logger }): GatewayInstance {
    let keyService: KeyServiceClient | undefined;
    let limitHits: LimitHitReporter | undefined;
    let server: Server | undefined;
    let url = '';
    return {
      get url() {
        return url;
      },
      async start() {
        keyService = createClient(
          KeyService,
          config.KEY_SERVICE_ADDRESS,
          serviceClientOptions({ defaultUnaryTimeoutMs: config.KEY_SERVICE_TIMEOUT }),
        );
        limitHits = buildLimitHitReporter({ config, keyService, store, logger });
        const app = buildGatewayApp({
          config,
          keyService,
          store,
          logger,
          limitHits,
          keyEvents: { bus, topic: keyEventsTopic },
        });
        const listening = createHttpServer(app, {
          headersTimeoutMs: config.HTTP_HEADERS_TIMEOUT,
          requestTimeoutMs: config.HTTP_REQUEST_TIMEOUT,
          keepAliveTimeoutMs: config.HTTP_KEEP_ALIVE_TIMEOUT,
        }).listen(config.PORT, config.HTTP_HOST);
        server = listening;
        await new Promise<void>((resolve, reject) => {
          listening.once('listening', resolve);
          listening.once('error', reject);
        });
        limitHits.start();
        const { port } = listening.address() as AddressInfo;
        url = `http://${config.HTTP_HOST === '0.0.0.0' ? '127.0.0.1' : config.HTTP_HOST}:${port}`;
        logger.info({ url, publicUrl: config.PUBLIC_URL ?? url }, 'gateway listening');
      },
      async stop() {
        if (server) await closeServer(server);
        // After the server: no refusal comes later. The last flush sends what this replica counted.
        await limitHits?.stop();
        if (keyService) closeClient(keyService);
      },
    };
  },
});

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeIdleConnections();
  });
}
