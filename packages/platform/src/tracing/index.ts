export { grpcServerSpan } from './grpc-spans.js';
export {
  currentTraceHeaders,
  REQUEST_ID_ATTRIBUTE,
  SpanKind,
  SpanStatusCode,
  startSpan,
  TRACE_HEADERS,
  traceContextOf,
  withSpan,
  type Attributes,
  type Span,
  type SpanStart,
  type TraceHeaders,
} from './trace-context.js';
export {
  isTracing,
  startTracing,
  TRACE_SAMPLERS,
  tracesUrl,
  tracingConfigShape,
  tracingSettings,
  type TracingConfig,
  type TraceSamplerName,
  type Tracing,
  type TracingSettings,
} from './tracing.js';
