import type { Logger, RateWindows } from '@svc/platform';
import express, { Router } from 'express';
import { apiErrorHandler, apiRouteNotFound } from '../http/api-errors.js';
import { bindRequestContext } from '../http/request-context.js';
import type { KeyServiceClient } from '../key-service-client.js';
import { apiLimits, type ApiLimitSettings } from '../limits/api-limits.js';
import type { CompletionBackend } from '../v1/completion-backend.js';
import { apiKeyRoutes } from './api-key-routes.js';
import { describeChainHandler } from './chain-route.js';
import { signInRoutes } from './sign-in-routes.js';
import { usageHandler } from './usage-route.js';
import { requireWalletSignIn } from './wallet-sign-in.js';

export interface ApiRouterSettings extends ApiLimitSettings {
  readonly bodyLimit: string;
}

export interface ApiRouterPorts {
  readonly keyService: KeyServiceClient;
  /** Names the chain of `GET /chain`; without one it answers 503 `not_configured`. */
  readonly completions?: CompletionBackend;
  readonly rateWindows: RateWindows;
  readonly logger: Logger;
  readonly settings: ApiRouterSettings;
}

/** Everything under `/api`: sign-in, key management, the chain, and their `{ error, message }` error shape. */
export function apiRouter({
  keyService,
  completions,
  rateWindows,
  logger,
  settings,
}: ApiRouterPorts): Router {
  const router = Router();
  // The app binds each request's logging context before it mounts this router (see buildGatewayApp).
  router.use((_req, res, next) => {
    // Sign-in tokens and freshly minted keys must never sit in a shared cache. `/chain` too: a console
    // reads it once per load, and a cached delegate outliving a change of signer would have wallets
    // authorize an address the service no longer uses.
    res.setHeader('cache-control', 'no-store');
    next();
  });
  // Bodies are read only once the caller passed its checks. Any body is read as JSON whatever its content
  // type, so a body that is not JSON is refused, not ignored. The context is bound again afterwards: the
  // body's stream events fire outside it.
  const readJsonBody = [express.json({ limit: settings.bodyLimit, type: () => true }), bindRequestContext()];

  const limits = apiLimits(rateWindows, settings);

  router.use('/auth', limits.signIn, readJsonBody, signInRoutes(keyService));
  // Public, so counted per client address like sign-in, in a window of its own.
  router.get('/chain', limits.chain, describeChainHandler(completions));
  router.use(
    '/api-keys',
    requireWalletSignIn(keyService, limits.badTokens),
    limits.keyRoutes,
    readJsonBody,
    apiKeyRoutes(keyService),
  );
  // The usage history (an extension of the interface, docs/api.md#usage): same token, same per-wallet limit.
  router.get(
    '/usage',
    requireWalletSignIn(keyService, limits.badTokens),
    limits.keyRoutes,
    usageHandler(keyService),
  );

  router.use(apiRouteNotFound());
  router.use(apiErrorHandler(logger));
  return router;
}
