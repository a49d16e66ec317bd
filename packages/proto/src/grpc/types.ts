import type { DescMessage, DescMethod, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import type { GenServiceMethods } from '@bufbuild/protobuf/codegenv2';
import type { Metadata } from '@grpc/grpc-js';

export type { GenServiceMethods };
type MethodShape = GenServiceMethods[string];
type In<M extends MethodShape> = MessageShape<M['input']>;
type InInit<M extends MethodShape> = MessageInitShape<M['input']>;
type Out<M extends MethodShape> = MessageShape<M['output']>;
type OutInit<M extends MethodShape> = MessageInitShape<M['output']>;

/** What a server handler knows about the call it serves. */
export interface CallContext {
  readonly method: DescMethod;
  /** Carried from the caller in `x-request-id`, or minted here when the caller sent none. */
  readonly requestId: string;
  readonly metadata: Metadata;
  /** When the caller gives up; undefined for a call without a deadline. */
  readonly deadline: Date | undefined;
  /** Aborted when the caller cancels, its deadline passes, or the server shuts down hard. */
  readonly signal: AbortSignal;
  readonly peer: string;
  /** Who called, as the service's authenticator established it; undefined on a service open to anyone. */
  readonly caller?: string;
}

/** What an authenticator sees of a call: its method and the caller's metadata, before any handler runs. */
export interface CallCredentials {
  readonly method: DescMethod;
  readonly metadata: Metadata;
  readonly peer: string;
}

/**
 * Decides whether a call may reach a service's handlers: returns the caller's name, or throws (or
 * rejects with) an RpcError, UNAUTHENTICATED as a rule, which is the caller's answer. A plain return
 * (not a promise) lets a call through with no extra turn of the event loop.
 */
export type CallAuthenticator = (call: CallCredentials) => string | Promise<string>;

/**
 * Who may call a service added to a GrpcServer: callers an authenticator accepts, or anyone (a service
 * whose callers prove themselves in its own protocol, such as the worker link's challenge).
 */
export type ServiceAccess = { readonly authenticate: CallAuthenticator } | { readonly open: true };

/** Server handler of each method kind: plain async functions and async iterables. */
export type MethodImpl<M extends MethodShape> = M['methodKind'] extends 'unary'
  ? (request: In<M>, context: CallContext) => Promise<OutInit<M>>
  : M['methodKind'] extends 'server_streaming'
    ? (request: In<M>, context: CallContext) => AsyncIterable<OutInit<M>>
    : M['methodKind'] extends 'client_streaming'
      ? (requests: AsyncIterable<In<M>>, context: CallContext) => Promise<OutInit<M>>
      : (requests: AsyncIterable<In<M>>, context: CallContext) => AsyncIterable<OutInit<M>>;

export type ServiceImpl<S extends GenServiceMethods> = { [K in keyof S]: MethodImpl<S[K]> };

/** Per-call options of a client call. */
export interface CallOptions {
  /** Relative deadline; ignored when `deadline` is set. */
  timeoutMs?: number;
  deadline?: Date;
  /** Cancels the call when aborted. */
  signal?: AbortSignal;
  requestId?: string;
  metadata?: Record<string, string>;
}

/** Client method of each method kind. */
export type ClientMethod<M extends MethodShape> = M['methodKind'] extends 'unary'
  ? (request: InInit<M>, options?: CallOptions) => Promise<Out<M>>
  : M['methodKind'] extends 'server_streaming'
    ? (request: InInit<M>, options?: CallOptions) => AsyncIterable<Out<M>>
    : M['methodKind'] extends 'client_streaming'
      ? (requests: AsyncIterable<InInit<M>>, options?: CallOptions) => Promise<Out<M>>
      : (requests: AsyncIterable<InInit<M>>, options?: CallOptions) => AsyncIterable<Out<M>>;

export type ServiceClient<S extends GenServiceMethods> = { readonly [K in keyof S]: ClientMethod<S[K]> };

export type AnyMessageSchema = DescMessage;
