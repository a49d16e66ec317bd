import { randomUUID } from 'node:crypto';
import { withRequestContext, withSpan } from '@svc/platform';
import type { RequestHandler, Response } from 'express';
import { requestSpanOf } from './request-span.js';

// A caller's id is kept only when it is short and plain, so it cannot smuggle anything into logs or metadata.
const ACCEPTED_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Takes the caller's `x-request-id` (or makes one) and echoes it on the response. */
export function assignRequestId(): RequestHandler {
  return (req, res, next) => {
    const offered = req.get('x-request-id');
    const requestId = offered !== undefined && ACCEPTED_REQUEST_ID.test(offered) ? offered : randomUUID();
    res.locals.requestId = requestId;
    res.setHeader('x-request-id', requestId);
    next();
  };
}

export function requestIdOf(res: Response): string | undefined {
  const requestId: unknown = res.locals.requestId;
  return typeof requestId === 'string' ? requestId : undefined;
}

/**
 * Runs the rest of the request in its logging context and its span (`traceRequests`), so log lines and
 * gRPC calls carry the id and the trace. Mount it again after body parsing: the body's stream events fire
 * outside any context the request entered earlier.
 */
export function bindRequestContext(): RequestHandler {
  return (_req, res, next) => {
    const requestId = requestIdOf(res) ?? randomUUID();
    const span = requestSpanOf(res);
    const inRequestContext = () => withRequestContext({ requestId }, () => next());
    if (span) withSpan(span, inRequestContext);
    else inRequestContext();
  };
}
