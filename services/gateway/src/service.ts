import type { EventSubscription, Logger, Store } from '@svc/platform';
import express, { type Express } from 'express';
import { apiRouter } from './api/api-router.js';
import { trustProxySetting, type GatewayConfig } from './config.js';
import { logRequests } from './http/access-log.js';
import { apiErrorHandler, apiRouteNotFound } from './http/api-errors.js';
import { CONSOLE_OFF, consoleDirectory, consoleRoutes } from './http/console-routes.js';
import { healthRoutes } from './http/health-routes.js';
import { openApiRoute } from './http/openapi-route.js';
import { securityHeaders } from './http/security-headers.js';
import { assignRequestId, bindRequestContext } from './http/request-context.js';
import { traceRequests } from './http/request-span.js';
import type { KeyServiceClient } from './key-service-client.js';
import { GatewayMetrics } from './observability/gateway-metrics.js';
import type { CompletionBackend } from './v1/completion-backend.js';
import { evictOnKeyEvents, type KeyEventFeed } from './v1/key-event-eviction.js';
import { KeyResolutionCache } from './v1/key-resolution-cache.js';
import { keyServiceLookup } from './v1/key-service-lookup.js';
import { LimitHitReporter } from './v1/limit-hit-reporter.js';
import type { PaymentSettlerPort } from './v1/per-call/payment-settler-port.js';
import { v1Router } from './v1/v1-router.js';

/** What the gateway runs on; main.ts passes the real ones, tests whatever they need. */
export interface GatewayPorts {
  readonly config: GatewayConfig;
  readonly keyService: KeyServiceClient;
  readonly store: Store;
  readonly logger: Logger;
  /** Where the gateway counts what operators watch; default: a registry of its own. */
  readonly metrics?: GatewayMetrics;
  /**
   * Counts refusals in the keys' `limitHits` (see buildLimitHitReporter). Its owner runs its periodic flush:
   * `start()` it, and `stop()` it after the server closed, which flushes once more (module.ts, tests).
   */
  readonly limitHits: LimitHitReporter;
  /** Runs completions (the job-orchestrator); without one, completions answer 503 `not_configured`. */
  readonly completions?: CompletionBackend;
  /** Takes per-call payments (the payment-settler); without one, the server takes none. */
  readonly settler?: PaymentSettlerPort;
  /**
   * Key changes from the bus, to evict cached keys early. The subscription is closed with the bus; while
   * it is not live the cache is off. Without it, cached keys live out their TTL (revocation is enforced
   * by the store's marker either way).
   */
  readonly keyEvents?: Omit<KeyEventFeed, 'groupPrefix'>;
  /**
   * Why the process must not take traffic now (the runner's readiness: an event consumer that died, not
   * one reconnecting through a broker outage), or undefined; `/readyz` answers 503 while it gives a reason.
   */
  readonly notReadyBecause?: () => string | undefined;
}

/** The limit-hit reporter as the config sets it up: counts in the store's tally, flushed to the key-service. */
export function buildLimitHitReporter(
  ports: Pick<GatewayPorts, 'config' | 'keyService' | 'store' | 'logger'>,
): LimitHitReporter {
  return new LimitHitReporter(ports.keyService, ports.logger, {
    tallies: ports.store.tallies,
    flushIntervalMs: ports.config.V1_LIMIT_HIT_FLUSH_INTERVAL,
  });
}

/** Runs `check` until it has succeeded once; from then on resolves at once. */
function answeredOnce(check: () => Promise<unknown>): () => Promise<void> {
  let answered = false;
  return async () => {
    if (answered) return;
    await check();
    answered = true;
  };
}

/** Builds the gateway's HTTP app from its ports: no globals, nothing listens until the caller says so. */
export function buildGatewayApp(ports: GatewayPorts): Express {
  const { config, keyService, store, logger } = ports;
  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.set('trust proxy', trustProxySetting(config.TRUST_PROXY));

  // Fail safe: while key events are not heard (not subscribed yet, or the consumer is down), the cache
  // is off and every call resolves the key at the key-service. The replica stays ready meanwhile.
  let keyEvents: EventSubscription | undefined;
  const keyCache = new KeyResolutionCache(keyServiceLookup(keyService), {
    maxEntries: config.V1_KEY_CACHE_MAX_ENTRIES,
    ttlMs: config.V1_KEY_CACHE_TTL,
    ...(ports.keyEvents ? { evictionsHeard: () => keyEvents?.health().live === true } : {}),
  });
  if (ports.keyEvents) {
    evictOnKeyEvents(
      { ...ports.keyEvents, groupPrefix: config.V1_KEY_EVENTS_GROUP_PREFIX },
      keyCache,
      logger,
    ).then(
      (subscription) => (keyEvents = subscription),
      (error: unknown) => logger.error({ err: error }, 'gave up subscribing to key events: the bus closed'),
    );
  }
  const keyServiceAnswered = answeredOnce(() =>
    keyService.getJwks({}, { timeoutMs: config.READINESS_TIMEOUT }),
  );

  // The logging context and the request's span are bound once here for everything after it (each binding
  // costs on every call); the routers bind them again only after reading a body, whose stream events fire
  // outside them.
  app.use(securityHeaders(), assignRequestId(), logRequests(logger), traceRequests(), bindRequestContext());
  // The document of the two surfaces below (an extension of docs/api.md): public, cacheable.
  app.use(openApiRoute({ publicUrl: config.PUBLIC_URL }));
  app.use(
    '/v1',
    v1Router({
      keyService,
      store,
      keyCache,
      backend: ports.completions,
      settler: ports.settler,
      limitHits: ports.limitHits,
      metrics: ports.metrics ?? new GatewayMetrics(),
      logger,
      settings: {
        bodyLimit: config.V1_BODY_LIMIT,
        keyRateLimit: config.V1_KEY_RATE_LIMIT,
        keyRateWindowMs: config.V1_KEY_RATE_WINDOW,
        keyConcurrencyLimit: config.V1_KEY_CONCURRENCY_LIMIT,
        concurrencyLeaseTtlMs: config.V1_CONCURRENCY_LEASE_TTL,
        badKeyRateLimit: config.V1_BAD_KEY_RATE_LIMIT,
        badKeyRateWindowMs: config.V1_BAD_KEY_RATE_WINDOW,
        spendReservationTtlMs: config.V1_SPEND_RESERVATION_TTL,
        payerRateLimit: config.V1_PAYER_RATE_LIMIT,
        payerRateWindowMs: config.V1_PAYER_RATE_WINDOW,
        payerConcurrencyLimit: config.V1_PAYER_CONCURRENCY_LIMIT,
        keylessRateLimit: config.V1_KEYLESS_RATE_LIMIT,
        keylessRateWindowMs: config.V1_KEYLESS_RATE_WINDOW,
        publicUrl: config.PUBLIC_URL,
      },
    }),
  );
  app.use(
    '/api',
    apiRouter({
      keyService,
      completions: ports.completions,
      rateWindows: store.rateWindows,
      logger,
      settings: {
        bodyLimit: config.API_BODY_LIMIT,
        keyRoutesRateLimit: config.KEY_ROUTES_RATE_LIMIT,
        keyRoutesRateWindowMs: config.KEY_ROUTES_RATE_WINDOW,
        badTokenRateLimit: config.API_BAD_TOKEN_RATE_LIMIT,
        badTokenRateWindowMs: config.API_BAD_TOKEN_RATE_WINDOW,
        signInRateLimit: config.SIGN_IN_RATE_LIMIT,
        signInRateWindowMs: config.SIGN_IN_RATE_WINDOW,
      },
    }),
  );
  // After the API routers, so their calls do not walk through it (no path is in both).
  app.use(
    healthRoutes({
      // What taking this replica out of rotation can fix (docs/operations.md, readiness): a consumer of
      // its own that died, its store connection, a key-service it never reached (a wrong address or
      // secret must stop a rollout). A key-service outage after that is every replica's: it stays in.
      checkReady: async () => {
        const notReady = ports.notReadyBecause?.();
        if (notReady !== undefined) throw new Error(notReady);
        await Promise.all([keyServiceAnswered(), store.ping()]);
      },
      readinessTimeoutMs: config.READINESS_TIMEOUT,
      logger,
    }),
  );
  // The web console at `/`, under a policy of its own; last, as it serves only paths nothing above has.
  if (config.CONSOLE_DIR === CONSOLE_OFF) logger.info('the web console is off (CONSOLE_DIR=off)');
  else app.use(consoleRoutes({ dir: consoleDirectory(config.CONSOLE_DIR), logger }));
  // Any other path answers JSON like `/api` does, never express's HTML page.
  app.use(apiRouteNotFound(), apiErrorHandler(logger));
  return app;
}
