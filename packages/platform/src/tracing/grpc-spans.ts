import { GrpcStatus, type CallContext, type CallScope } from '@svc/proto';
import {
  ATTR_RPC_METHOD,
  ATTR_RPC_STATUS_CODE,
  ATTR_RPC_SYSTEM_NAME,
  RPC_SYSTEM_NAME_VALUE_GRPC,
} from '@opentelemetry/semantic-conventions';
import {
  REQUEST_ID_ATTRIBUTE,
  SpanKind,
  SpanStatusCode,
  startSpan,
  traceContextOf,
  withSpan,
} from './trace-context.js';
import { isTracing } from './tracing.js';

const UNTRACED: CallScope = { run: (handler) => handler(), end: () => undefined };

// The codes OpenTelemetry's gRPC conventions count as a server's error; the others are the caller's.
const SERVER_ERRORS = new Set<GrpcStatus>([
  GrpcStatus.UNKNOWN,
  GrpcStatus.DEADLINE_EXCEEDED,
  GrpcStatus.UNIMPLEMENTED,
  GrpcStatus.INTERNAL,
  GrpcStatus.UNAVAILABLE,
  GrpcStatus.DATA_LOSS,
]);

/**
 * A server span for one gRPC call, continuing the trace its metadata carries (`traceparent`): its
 * method, request id and status, nothing of the messages or the caller's token. A bidi stream is a link
 * that outlives the calls it serves (the worker link), so it opens none.
 */
export function grpcServerSpan(call: CallContext): CallScope {
  if (!isTracing() || call.method.methodKind === 'bidi_streaming') return UNTRACED;
  const method = `${call.method.parent.typeName}/${call.method.name}`;
  const span = startSpan(method, {
    kind: SpanKind.SERVER,
    parent: traceContextOf({
      traceparent: metadataText(call, 'traceparent'),
      tracestate: metadataText(call, 'tracestate'),
    }),
    attributes: {
      [ATTR_RPC_SYSTEM_NAME]: RPC_SYSTEM_NAME_VALUE_GRPC,
      [ATTR_RPC_METHOD]: method,
      [REQUEST_ID_ATTRIBUTE]: call.requestId,
    },
  });
  return {
    run: (handler) => withSpan(span, handler),
    end: (code) => {
      span.setAttribute(ATTR_RPC_STATUS_CODE, GrpcStatus[code] ?? String(code));
      if (SERVER_ERRORS.has(code)) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}

function metadataText(call: CallContext, name: string): string | undefined {
  const value = call.metadata.get(name)[0];
  return typeof value === 'string' ? value : undefined;
}
