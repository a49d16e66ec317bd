import type { Logger } from '@svc/platform';
import { Router } from 'express';

export interface HealthSettings {
  /** Resolves when every dependency a request needs answers; rejects otherwise. */
  readonly checkReady: () => Promise<void>;
  readonly readinessTimeoutMs: number;
  readonly logger: Logger;
}

function withTimeout(work: Promise<void>, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}

/** `/healthz`: the process serves HTTP (liveness). `/readyz`: it can also answer requests (readiness). */
export function healthRoutes({ checkReady, readinessTimeoutMs, logger }: HealthSettings): Router {
  const router = Router();
  router.get('/healthz', (_req, res) => {
    res.json({ status: 'ok' });
  });
  router.get('/readyz', async (_req, res) => {
    try {
      await withTimeout(checkReady(), readinessTimeoutMs);
      res.json({ status: 'ready' });
    } catch (error) {
      logger.warn({ err: error }, 'not ready');
      res.status(503).json({ status: 'not_ready' });
    }
  });
  return router;
}
