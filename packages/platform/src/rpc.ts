import { GrpcServer, METADATA, RpcError, type ClientOptions, type GrpcServerOptions } from '@svc/proto';
import { mapAppErrorToRpc } from './errors/index.js';
import { currentRequestId, withRequestContext, type Logger } from './logging/index.js';
import type { ServiceName } from './service-token-keys.js';
import type { ServiceIdentity } from './service-tokens.js';
import { currentTraceHeaders, grpcServerSpan } from './tracing/index.js';

/**
 * A gRPC server wired the way every service needs it: AppErrors keep their code across the wire, other
 * errors are logged (with the request id) and answered INTERNAL, handlers run in the caller's request
 * context and in a server span of the caller's trace, and calls an authenticator refused are logged
 * (never their token).
 */
export function createServiceGrpcServer(logger: Logger, options: GrpcServerOptions = {}): GrpcServer {
  return new GrpcServer({
    mapError: mapAppErrorToRpc,
    onUnexpectedError: (error, context) =>
      logger.error(
        { err: error, method: context.method.name, requestId: context.requestId },
        'unexpected error in gRPC handler',
      ),
    runInContext: (context, handler) => withRequestContext({ requestId: context.requestId }, handler),
    openCallScope: grpcServerSpan,
    onRefused: (error, call) => {
      const fields = { method: call.method.name, peer: call.peer };
      if (error instanceof RpcError) logger.warn({ ...fields, reason: error.message }, 'gRPC call refused');
      else logger.error({ ...fields, err: error }, 'gRPC call refused: the authenticator failed');
    },
    ...options,
  });
}

export interface ServiceClientOptions extends ClientOptions {
  /** The calling service: every call carries its service token. */
  readonly identity: ServiceIdentity;
  /** The service called, which its tokens name as their audience. */
  readonly audience: ServiceName;
}

/**
 * Calls spread over every address the peer's name resolves to (a headless Kubernetes Service lists each
 * ready replica), not pinned to the first one: gRPC's default `pick_first` sends a client's every call
 * down one connection, so replicas an autoscaler adds would take no calls from clients already running.
 */
export const ROUND_ROBIN_SERVICE_CONFIG = JSON.stringify({ loadBalancingConfig: [{ round_robin: {} }] });

/**
 * Client options of a call from one service to another: its service token, the current request id and
 * trace context, and calls balanced over the peer's replicas.
 */
export function serviceClientOptions({
  identity,
  audience,
  ...options
}: ServiceClientOptions): ClientOptions {
  return {
    defaultUnaryTimeoutMs: 10_000,
    ...options,
    channelOptions: { 'grpc.service_config': ROUND_ROBIN_SERVICE_CONFIG, ...options.channelOptions },
    defaultMetadata: () => ({
      [METADATA.requestId]: currentRequestId(),
      ...currentTraceHeaders(),
      ...options.defaultMetadata?.(),
      [METADATA.authorization]: identity.authorization(audience),
    }),
  };
}
