import { AppError, type Logger, type Store } from '@svc/platform';
import express, { Router, type RequestHandler } from 'express';
import { bindRequestContext } from '../http/request-context.js';
import type { KeyServiceClient } from '../key-service-client.js';
import { v1Limits, type V1LimitSettings } from '../limits/v1-limits.js';
import type { GatewayMetrics } from '../observability/gateway-metrics.js';
import { authenticateApiKey, authenticateWhenPresented } from './api-key-auth.js';
import { chatCompletionsHandler } from './chat-completions-route.js';
import type { CompletionBackend } from './completion-backend.js';
import type { KeyResolutionCache } from './key-resolution-cache.js';
import type { LimitHitReporter } from './limit-hit-reporter.js';
import { listModelsHandler } from './models-route.js';
import type { PaymentSettlerPort } from './per-call/payment-settler-port.js';
import { refusePerCallPayments } from './per-call/payment-signature.js';
import { PerCallPayments } from './per-call/per-call-payments.js';
import { SpendReservations } from './spend-reservations.js';
import { v1ErrorHandler, v1RouteNotFound } from './v1-errors.js';

export interface V1RouterSettings extends V1LimitSettings {
  readonly bodyLimit: string;
  readonly spendReservationTtlMs: number;
  /** PUBLIC_URL: names the paid resource of per-call payments; unset, the request's own origin does. */
  readonly publicUrl: string | undefined;
}

export interface V1RouterPorts {
  readonly keyService: KeyServiceClient;
  readonly store: Store;
  readonly keyCache: KeyResolutionCache;
  /** Runs completions and lists models; undefined on a server with completions off. */
  readonly backend: CompletionBackend | undefined;
  /** States, verifies and releases per-call payments; undefined on a server that takes none. */
  readonly settler: PaymentSettlerPort | undefined;
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
  const { keyService, store, keyCache, backend, settler, limitHits, metrics, logger, settings } = ports;
  const router = Router();
  // The app binds each request's logging context before it mounts this router (see buildGatewayApp).
  router.use((_req, res, next) => {
    res.setHeader('cache-control', 'no-store');
    next();
  });

  const limits = v1Limits(store, settings, limitHits, logger);
  const authenticate = authenticateApiKey({
    cache: keyCache,
    revocations: store.revocations,
    badKeys: limits.badKeys,
    // Counted in the same store operation as the revocation check: see authenticateApiKey.
    keyRate: limits.keyRate,
  });

  // Keyless payers are held to limits of their own.
  const perCall = settler && new PerCallPayments(settler, limits.payerLimits, settings.publicUrl, logger);

  router.get('/models', authenticate, listModelsHandler(backend));
  router.post(
    '/chat/completions',
    // With per-call payments, a call without `Authorization` goes on to be paid (or answered 402).
    ...(perCall ? [authenticateWhenPresented(authenticate)] : [refusePerCallPayments(), authenticate]),
    requireJsonContentType(),
    // Any body is read as JSON, so one that is not JSON is refused rather than ignored. The context is bound
    // again afterwards: the body's stream events fire outside it.
    express.json({ limit: settings.bodyLimit, type: () => true }),
    bindRequestContext(),
    chatCompletionsHandler({
      backend,
      slots: limits.keySlots,
      spend: new SpendReservations(keyService, limitHits, settings.spendReservationTtlMs, metrics, logger),
      limitHits,
      perCall,
      logger,
    }),
  );

  router.use(v1RouteNotFound());
  router.use(v1ErrorHandler(logger));
  return router;
}
