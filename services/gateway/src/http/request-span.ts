import {
  isTracing,
  REQUEST_ID_ATTRIBUTE,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceContextOf,
  type Span,
} from '@svc/platform';
import type { Request, RequestHandler, Response } from 'express';
import { requestIdOf } from './request-context.js';

// Probes come every few seconds from the kubelet and belong to no call anyone follows.
const UNTRACED_PATHS = new Set(['/healthz', '/readyz']);

/**
 * Opens the request's server span: the root of its call's trace, or a child of the caller's
 * `traceparent`. It records the method, the route, the status and the request id, never a header (the
 * bearer token, the payment signature) nor the body (the prompt). `bindRequestContext` makes it current.
 */
export function traceRequests(): RequestHandler {
  return (req, res, next) => {
    if (!isTracing() || UNTRACED_PATHS.has(req.path)) {
      next();
      return;
    }
    const span = startSpan(req.method, {
      kind: SpanKind.SERVER,
      parent: traceContextOf({ traceparent: req.get('traceparent'), tracestate: req.get('tracestate') }),
      attributes: {
        'http.request.method': req.method,
        ...(requestIdOf(res) ? { [REQUEST_ID_ATTRIBUTE]: requestIdOf(res) } : {}),
      },
    });
    res.locals.requestSpan = span;
    res.once('close', () => endRequestSpan(span, req, res));
    next();
  };
}

export function requestSpanOf(res: Response): Span | undefined {
  return res.locals.requestSpan as Span | undefined;
}

function endRequestSpan(span: Span, req: Request, res: Response): void {
  // The route matched (`/v1/chat/completions`), not the path: ids in a path stay out, and it names the span.
  const route = (req.route as { path?: unknown } | undefined)?.path;
  if (typeof route === 'string') {
    const template = route === '/' && req.baseUrl ? req.baseUrl : `${req.baseUrl}${route}`;
    span.updateName(`${req.method} ${template}`);
    span.setAttribute('http.route', template);
  }
  span.setAttribute('http.response.status_code', res.statusCode);
  if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
  span.end();
}
