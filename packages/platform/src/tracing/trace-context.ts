import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Span,
} from '@opentelemetry/api';
import { isTracing } from './tracing.js';

export { SpanKind, SpanStatusCode, type Attributes, type Span };

/**
 * The request id on our spans. Only identifiers go on a span (request id, model, job, session, the
 * payment path): never a prompt, an API key, a token, a signature or wallet secrets.
 */
export const REQUEST_ID_ATTRIBUTE = 'svc.request_id';

/** The W3C trace context as it travels: gRPC metadata and Kafka headers of these names. */
export const TRACE_HEADERS = ['traceparent', 'tracestate'] as const;
export type TraceHeaders = { [name in (typeof TRACE_HEADERS)[number]]?: string };

const NO_HEADERS: TraceHeaders = Object.freeze({});

/** The current span's context as headers to send on; none while tracing is off or no span is current. */
export function currentTraceHeaders(): TraceHeaders {
  if (!isTracing()) return NO_HEADERS;
  const headers: TraceHeaders = {};
  propagation.inject(context.active(), headers);
  return headers;
}

/** The trace a caller's headers continue; a new trace (the root context) when they carry none. */
export function traceContextOf(headers: TraceHeaders): Context {
  return propagation.extract(ROOT_CONTEXT, headers);
}

/** What our spans record; never a prompt, a key, a token, a signature or a header that carries one. */
export interface SpanStart {
  readonly kind: SpanKind;
  /** The trace this span continues; default the current span's. */
  readonly parent?: Context;
  readonly attributes?: Attributes;
}

const TRACER_NAME = 'svc';

/** Starts a span (a no-op one while tracing is off). */
export function startSpan(name: string, { kind, parent, attributes }: SpanStart): Span {
  return trace.getTracer(TRACER_NAME).startSpan(name, { kind, attributes }, parent ?? context.active());
}

/** Runs `work` with `span` current: what it calls (gRPC, events) carries the span's trace on. */
export function withSpan<T>(span: Span, work: () => T): T {
  return context.with(trace.setSpan(context.active(), span), work);
}
