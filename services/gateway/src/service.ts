import type { Logger, Store } from '@svc/platform';
import express, { type Express } from 'express';
import { apiRouter } from './api/api-router.js';
import { trustProxySetting, type GatewayConfig } from './config.js';
import { logRequests } from './http/access-log.js';
import { healthRoutes } from './http/health-routes.js';
import { assignRequestId, bindRequestContext } from './http/request-context.js';
import type { KeyServiceClient } from './key-service-client.js';

/** What the gateway runs on; main.ts passes the real ones, tests whatever they need. */
export interface GatewayPorts {
  readonly config: GatewayConfig;
  readonly keyService: KeyServiceClient;
  readonly store: Store;
  readonly logger: Logger;
}

/** Builds the gateway's HTTP app from its ports: no globals, nothing listens until the caller says so. */
export function buildGatewayApp({ config, keyService, store, logger }: GatewayPorts): Express {
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', trustProxySetting(config.TRUST_PROXY));

  app.use(assignRequestId(), logRequests(logger));
  app.use(
    bindRequestContext(),
    healthRoutes({
      checkReady: async () => {
        await Promise.all([keyService.getJwks({}, { timeoutMs: config.READINESS_TIMEOUT }), store.ping()]);
      },
      readinessTimeoutMs: config.READINESS_TIMEOUT,
      logger,
    }),
  );
  app.use(
    '/api',
    apiRouter({
      keyService,
      rateWindows: store.rateWindows,
      logger,
      settings: {
        bodyLimit: config.API_BODY_LIMIT,
        keyRoutesRateLimit: config.KEY_ROUTES_RATE_LIMIT,
        keyRoutesRateWindowMs: config.KEY_ROUTES_RATE_WINDOW,
        signInRateLimit: config.SIGN_IN_RATE_LIMIT,
        signInRateWindowMs: config.SIGN_IN_RATE_WINDOW,
      },
    }),
  );
  return app;
}
