import { AppError, type Logger, type Store } from '@svc/platform';
import express, { Router, type RequestHandler } from 'express';
import { BadCredentialGuard } from '../http/bad-credential-guard.js';
import { bindRequestContext } from '../http/request-context.js';
import type { KeyServiceClient } from '../key-service-client.js';
import type { GatewayMetrics } from '../observability/gateway-metrics.js';
import { authenticateApiKey, authenticateWhenPresented } from './api-key-auth.js';
import { CallSlots } from './call-slots.js';
import { chatCompletionsHandler } from './chat-completions-route.js';
import type { CompletionBackend } from './completion-backend.js';
import type { KeyResolutionCache } from './key-resolution-cache.js';
import type { LimitHitReporter } from './limit-hit-reporter.js';
import { listModelsHandler } from './models-route.js';
import { PayerLimits } from './per-call/payer-limits.js';
import type { PaymentSettlerPort } from './per-call/payment-settler-port.js';
import { refusePerCallPayments } from './per-call/payment-signature.js';
import { PerCallPayments } from './per-call/per-call-payments.js';
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
  readonly payerRateLimit: number;
  readonly payerRateWindowMs: number;
  readonly payerConcurrencyLimit: number;
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

/** Per-call payments through `settler`, keyless payers held to limits of their own. */
function perCallPayments(
  settler: PaymentSettlerPort,
  store: Store,
  settings: V1RouterSettings,
  logger: Logger,
): PerCallPayments {
  const payerSlots = new CallSlots(
    store.concurrency,
    { holder: 'payer', limit: settings.payerConcurrencyLimit, leaseTtlMs: settings.concurrencyLeaseTtlMs },
    logger,
  );
  const payerLimits = new PayerLimits(
    store.rateWindows,
    { limit: settings.payerRateLimit, windowMs: settings.payerRateWindowMs },
    payerSlots,
  );
  return new PerCallPayments(settler, payerLimits, settings.publicUrl, logger);
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

  const authenticate = authenticateApiKey({
    cache: keyCache,
    revocations: store.revocations,
    badKeys: new BadCredentialGuard(store.rateWindows, {
      name: 'v1:bad-keys',
      limit: settings.badKeyRateLimit,
      windowMs: settings.badKeyRateWindowMs,
      refusal: 'Too many calls with an unknown or revoked API key from this address',
    }),
    // Counted in the same store operation as the revocation check: see authenticateApiKey.
    keyRate: {
      limit: settings.keyRateLimit,
      windowMs: settings.keyRateWindowMs,
      onRefused: (keyId) => limitHits.report(keyId, 'rate'),
    },
  });

  const perCall = settler && perCallPayments(settler, store, settings, logger);

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
      slots: new CallSlots(
        store.concurrency,
        { holder: 'key', limit: settings.keyConcurrencyLimit, leaseTtlMs: settings.concurrencyLeaseTtlMs },
        logger,
      ),
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
