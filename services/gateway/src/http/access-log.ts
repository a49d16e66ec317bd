import type { Logger } from '@svc/platform';
import type { RequestHandler } from 'express';
import { requestIdOf } from './request-context.js';

/**
 * One log line per request once it ends. Only the method, path, status and timing are written: headers
 * (the bearer token), query strings and bodies (signatures) stay out of the logs.
 */
export function logRequests(logger: Logger): RequestHandler {
  // The line's fields are the six below, and none of the paths the logger redacts (authorization, key,
  // token, ...) is one of them, so redaction could never change the line: it skips it, as it copies and
  // walks each logged object and costs more than the rest of the line. Scrubbing of message text stays.
  const accessLog = logger.child({}, { redact: [] });
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
      if (res.statusCode >= 500) accessLog.warn(line, 'request failed');
      else accessLog.info(line, 'request');
    });
    next();
  };
}
