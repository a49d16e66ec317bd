import { AppError, type Logger, type Store } from '@svc/platform';
import express, { Router, type RequestHandler } from 'express';
import { bindRequestContext } from '../http/request-context.js';
import type { KeyServiceClient } from '../key-service-client.js';
import type { GatewayMetrics } from '../observability/gateway-metrics.js';
import { authenticateApiKey } from './api-key-auth.js';
import { BadKeyGuard } from './bad-key-guard.js';
import { CallSlots } from './call-slots.js';
import { chatCompletionsHandler } from './chat-completions-route.js';
import type { CompletionBackend } from './completion-backend.js';
import type { KeyResolutionCache } from './key-resolution-cache.js';
import type { LimitHitReporter } from './limit-hit-reporter.js';
import { listModelsHandler } from './models-route.js';
import { refusePerCallPayments } from './payment-signature.js';
import { SpendReservations } from './spend-reservations.js';
import { v1ErrorHandler, v1RouteNotFound } from './v1-errors.js';

export interface V1RouterSettings {
  readonly bodyLimit: string;
  readonly keyRateLimit: number;
  readonly keyRateWindowMs: number;
  readonly keyConcurrencyLimit: number;
  readonly concurrencyLeaseTtlMs: number;
  readonly badKeyRateLimit: number;
  readonly badKeyRateWindowMs: number;
  readonly spendReservationTtlMs: number;
}

export interface V1RouterPorts {
  readonly keyService: KeyServiceClient;
  readonly store: Store;
  readonly keyCache: KeyResolutionCache;
  /** Runs completions and lists models; undefined on a server with completions off. */
  readonly backend: CompletionBackend | undefined;
  readonly limitHits: LimitHitReporter;
  readonly metrics: GatewayMetrics;
  readonly logger: Logger;
  readonly settings: V1RouterSettings;
}

function requireJsonContentType(): RequestHandler {
  return (req, _res, next) => {
    if (!req.is('application/json'))
      throw new AppError('invalid_request', {
        message: 'Content-Type must be application/json.',
        fields: { param: 'content-type' },
      });
    next();
  };
}

/** Everything under `/v1`: the OpenAI-compatible surface and its `{ error: { ... } }` error shape. */
export function v1Router(ports: V1RouterPorts): Router {
  const { keyService, store, keyCache, backend, limitHits, metrics, logger, settings } = ports;
  const router = Router();
  // The app binds each request's logging context before it mounts this router (see buildGatewayApp).
  router.use((_req, res, next) => {
    res.setHeader('cache-control', 'no-store');
    next();
  });

  const authenticate = authenticateApiKey({
    cache: keyCache,
    revocations: store.revocations,
    badKeys: new BadKeyGuard(store.rateWindows, {
      limit: settings.badKeyRateLimit,
      windowMs: settings.badKeyRateWindowMs,
    }),
    // Counted in the same store operation as the revocation check: see authenticateApiKey.
    keyRate: {
      limit: settings.keyRateLimit,
      windowMs: settings.keyRateWindowMs,
      onRefused: (keyId) => limitHits.report(keyId, 'rate'),
    },
  });

  router.get('/models', authenticate, listModelsHandler(backend));
  router.post(
    '/chat/completions',
    refusePerCallPayments(),
    authenticate,
    requireJsonContentType(),
    // Any body is read as JSON, so one that is not JSON is refused rather than ignored. The context is bound
    // again afterwards: the body's stream events fire outside it.
    express.json({ limit: settings.bodyLimit, type: () => true }),
    bindRequestContext(),
    chatCompletionsHandler({
      backend,
      slots: new CallSlots(
        store.concurrency,
        { limit: settings.keyConcurrencyLimit, leaseTtlMs: settings.concurrencyLeaseTtlMs },
        logger,
      ),
      spend: new SpendReservations(keyService, limitHits, settings.spendReservationTtlMs, metrics, logger),
      limitHits,
      logger,
    }),
  );

  router.use(v1RouteNotFound());
  router.use(v1ErrorHandler(logger));
  return router;
}
