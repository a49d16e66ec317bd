import { openApiDocument } from '@svc/api/openapi';
import { Router } from 'express';

/** How long a client or cache may keep the document: it changes only with a deployment. */
export const OPENAPI_CACHE_CONTROL = 'public, max-age=300';

/**
 * `GET /openapi.json`: the OpenAPI 3.1 document of `/v1` and `/api`, generated from the schemas the
 * gateway reads requests with. Public and cacheable; built once, on its first request (some 30 ms that a
 * start need not wait for).
 */
export function openApiRoute(options: { readonly publicUrl?: string | undefined } = {}): Router {
  const serverUrl = options.publicUrl?.replace(/\/+$/, '');
  let body: string | undefined;
  const router = Router();
  router.get('/openapi.json', (_req, res) => {
    body ??= JSON.stringify(openApiDocument(serverUrl ? { serverUrl } : {}));
    res.setHeader('cache-control', OPENAPI_CACHE_CONTROL);
    res.type('application/json').send(body);
  });
  return router;
}
