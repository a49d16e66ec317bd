import type { Logger } from '@svc/platform';
import type { RequestHandler } from 'express';
import { requestIdOf } from './request-context.js';

/**
 * One log line per request once it ends. Only the method, path, status and timing are written: headers
 * (the bearer token), query strings and bodies (signatures) stay out of the logs.
 */
export function logRequests(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const startedAt = process.hrtime.bigint();
    const path = req.path;
    res.once('close', () => {
      const durationMs = Number(process.hrtime.bigint() - startedAt) / 1e6;
      const line = {
        requestId: requestIdOf(res),
        method: req.method,
        path,
        status: res.statusCode,
        durationMs: Math.round(durationMs * 10) / 10,
        // false when the client went away before the response was written in full.
        completed: res.writableFinished,
      };
      if (res.statusCode >= 500) logger.warn(line, 'request failed');
      else logger.info(line, 'request');
    });
    next();
  };
}
