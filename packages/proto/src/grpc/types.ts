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
}

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
