export { AsyncQueue } from './async-queue.js';
export { closeClient, createClient, waitForClientReady, type ClientOptions } from './client.js';
export { grpcServiceDefinition, methodPath } from './definition.js';
export {
  tlsChannelCredentials,
  tlsServerCredentials,
  type ChannelCredentials,
  type ServerCredentials,
} from './tls.js';
export { GrpcStatus, isRpcError, METADATA, RpcError, type ErrorDetails } from './errors.js';
export {
  DEFAULT_MAX_MESSAGE_BYTES,
  GrpcServer,
  type CallScope,
  type EndedCall,
  type GrpcServerOptions,
} from './server.js';
export type {
  CallAuthenticator,
  CallContext,
  CallCredentials,
  CallOptions,
  ClientMethod,
  MethodImpl,
  ServiceAccess,
  ServiceClient,
  ServiceImpl,
} from './types.js';
