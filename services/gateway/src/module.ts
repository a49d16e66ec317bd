import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { keyEventsTopic } from '@svc/platform';
import { closeClient } from '@svc/proto';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { defineModule, loopbackFor, peerClient, type ServiceInstance } from '@svc/runtime';
import { gatewayConfigShape, trustProxySetting } from './config.js';
import { createHttpServer, drainHttpServer } from './http/http-server.js';
import { GatewayMetrics } from './observability/gateway-metrics.js';
import { buildGatewayApp, buildLimitHitReporter } from './service.js';
import { OrchestratorBackend } from './v1/orchestrator-backend.js';
import { SettlerPayments } from './v1/per-call/settler-payments.js';

/**
 * A running gateway; `url` is where it listens (PORT 0 picks a free port), `publicUrl` where users reach
 * it (PUBLIC_URL, which sign-in is bound to; `url` when unset). Its metrics are the process's (the
 * runner's `metricsUrl`).
 */
export interface GatewayInstance extends ServiceInstance {
  readonly url: string;
  readonly publicUrl: string;
}

/** The gateway as the runner runs it: the public HTTP server over the key-service's gRPC API. */
export const gatewayModule = defineModule({
  name: 'gateway',
  configShape: gatewayConfigShape,
  needs: ['store', 'bus', 'metrics'],
  peers: {
    KEY_SERVICE_ADDRESS: 'key-service',
    ORCHESTRATOR_ADDRESS: 'job-orchestrator',
    SETTLER_ADDRESS: 'payment-settler',
  },
  build(config, { store, bus, metrics, logger, readiness }): GatewayInstance {
    // Clients connect on their first call: nothing here reaches the network.
    const keyService = peerClient(KeyService, {
      config,
      from: 'gateway',
      to: 'key-service',
      address: config.KEY_SERVICE_ADDRESS,
      timeoutMs: config.KEY_SERVICE_TIMEOUT,
    });
    const orchestrator = peerClient(JobOrchestrator, {
      config,
      from: 'gateway',
      to: 'job-orchestrator',
      address: config.ORCHESTRATOR_ADDRESS,
      timeoutMs: config.ORCHESTRATOR_TIMEOUT,
    });
    const settler = peerClient(PaymentSettler, {
      config,
      from: 'gateway',
      to: 'payment-settler',
      address: config.SETTLER_ADDRESS,
      timeoutMs: config.SETTLER_TIMEOUT,
    });
    const limitHits = buildLimitHitReporter({ config, keyService, store, logger });
    const gatewayMetrics = new GatewayMetrics(metrics);
    let server: Server | undefined;
    let url = '';
    return {
      get url() {
        return url;
      },
      get publicUrl() {
        return config.PUBLIC_URL ?? url;
      },
      async start() {
        // The app subscribes to key events as it is built: I/O, so here rather than in build.
        const app = buildGatewayApp({
          config,
          keyService,
          store,
          logger,
          metrics: gatewayMetrics,
          limitHits,
          ...(orchestrator ? { completions: new OrchestratorBackend(orchestrator, logger) } : {}),
          ...(settler ? { settler: new SettlerPayments(settler, config.V1_PAYMENT_RESERVATION_TTL) } : {}),
          keyEvents: { bus, topic: keyEventsTopic },
          notReadyBecause: () => readiness.notReadyBecause(),
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
        url = `http://${loopbackFor(config.HTTP_HOST)}:${port}`;
        logger.info({ url, publicUrl: config.PUBLIC_URL ?? url }, 'gateway listening');
        if (trustProxySetting(config.TRUST_PROXY) === true)
          logger.warn(
            'TRUST_PROXY=true believes any X-Forwarded-For, so any client chooses the address its per-address limits count: name your proxies instead',
          );
      },
      async stop() {
        if (server) await drainHttpServer(server, config.HTTP_SHUTDOWN_GRACE);
        // After the server: no refusal comes later. The last flush sends what this replica counted.
        await limitHits.stop();
        closeClient(keyService);
        if (orchestrator) closeClient(orchestrator);
        if (settler) closeClient(settler);
      },
    };
  },
});
