import { GrpcServer, METADATA, type ClientOptions, type GrpcServerOptions } from '@svc/proto';
import { mapAppErrorToRpc } from './errors/index.js';
import { currentRequestId, withRequestContext, type Logger } from './logging/index.js';

/**
 * A gRPC server wired the way every service needs it: AppErrors keep their code across the wire, other
 * errors are logged (with the request id) and answered INTERNAL, handlers run in the caller's request context.
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
    ...options,
  });
}

/** Client options that carry the current request id to the callee. */
export function serviceClientOptions(options: ClientOptions = {}): ClientOptions {
  return {
    defaultUnaryTimeoutMs: 10_000,
    ...options,
    defaultMetadata: () => ({ [METADATA.requestId]: currentRequestId(), ...options.defaultMetadata?.() }),
  };
}
