import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { create, type DescMethod, type DescService } from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import * as grpc from '@grpc/grpc-js';
import { HealthImplementation } from 'grpc-health-check';
import { AsyncQueue } from './async-queue.js';
import { grpcServiceDefinition } from './definition.js';
import { GrpcStatus, METADATA, RpcError } from './errors.js';
import type {
  CallAuthenticator,
  CallContext,
  CallCredentials,
  GenServiceMethods,
  ServiceAccess,
  ServiceImpl,
} from './types.js';

/** Gives the product 16 MiB messages: conversations arrive whole and oldest messages are dropped later. */
export const DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface GrpcServerOptions {
  /** Turns a domain error into an RpcError; return undefined to fall back to INTERNAL. */
  mapError?: (error: unknown) => RpcError | undefined;
  /** Told about every error that was not an RpcError (a bug or an outage): the caller only sees INTERNAL. */
  onUnexpectedError?: (error: unknown, context: CallContext) => void;
  /**
   * Runs every handler inside this wrapper, e.g. to bind the request id to a logging context; a streamed
   * answer is read inside it too, so a generator handler's body runs in the context.
   */
  runInContext?: <T>(context: CallContext, handler: () => T) => T;
  /**
   * Opens a scope for every call a handler takes (a trace span): the handler runs inside it, like
   * `runInContext`, and it hears the status the caller got.
   */
  openCallScope?: (context: CallContext) => CallScope;
  credentials?: grpc.ServerCredentials;
  channelOptions?: grpc.ChannelOptions;
  /**
   * Every service added must say who may call it (`add`'s `access`), so none is served open by
   * omission. grpc.health.v1 stays open whatever this says: probes carry no credentials.
   */
  requireAccess?: boolean;
  /** Told about every call an authenticator refused, before the caller hears UNAUTHENTICATED. */
  onRefused?: (error: unknown, call: CallCredentials) => void;
  /** Told once about every call of an added service as it ends, refused and cancelled ones too (metrics). */
  onCallEnd?: (call: EndedCall) => void;
}

/** What `openCallScope` opens for one call. */
export interface CallScope {
  run<T>(handler: () => T): T;
  end(code: GrpcStatus): void;
}

/** How one call ended, as `onCallEnd` hears it. */
export interface EndedCall {
  readonly method: DescMethod;
  /** The status the caller got: OK, the error's, or CANCELLED / UNAVAILABLE for a call cut short. */
  readonly code: GrpcStatus;
  /** From the call's arrival (before authentication) to its end. */
  readonly seconds: number;
}

type GrpcCall =
  | grpc.ServerUnaryCall<object, object>
  | grpc.ServerReadableStream<object, object>
  | grpc.ServerWritableStream<object, object>
  | grpc.ServerDuplexStream<object, object>;
type AnyHandler = (input: unknown, context: CallContext) => unknown;
/** A started call's context and handler result; `done` ends it with the status its caller got. */
interface StartedCall {
  readonly context: CallContext;
  readonly result: unknown;
  done(code: GrpcStatus): void;
}

/**
 * A @grpc/grpc-js server for protobuf-es services with `grpc.health.v1` built in: every registered
 * service reports SERVING once listening and NOT_SERVING from the start of a shutdown, so Kubernetes
 * gRPC probes and load balancers drain it before it stops.
 */
export class GrpcServer {
  readonly server: grpc.Server;
  readonly health = new HealthImplementation({ '': 'NOT_SERVING' });
  private readonly serviceNames: string[] = [];
  private readonly liveCalls = new Set<AbortController>();
  private listening = false;

  constructor(private readonly options: GrpcServerOptions = {}) {
    this.server = new grpc.Server({
      'grpc.max_receive_message_length': DEFAULT_MAX_MESSAGE_BYTES,
      'grpc.max_send_message_length': DEFAULT_MAX_MESSAGE_BYTES,
      ...options.channelOptions,
    });
    this.health.addToServer(this.server);
  }

  /**
   * Serves `service`. With `access.authenticate`, every call is authenticated before any handler runs and
   * refused when the authenticator says no; `access.open` (or no access, unless the server requires one)
   * serves it to anyone.
   */
  add<S extends GenServiceMethods>(
    service: GenService<S>,
    implementation: ServiceImpl<S>,
    access?: ServiceAccess,
  ): this {
    const descriptor = service as unknown as DescService;
    if (access === undefined && this.options.requireAccess)
      throw new Error(
        `${descriptor.typeName}: say who may call it (an authenticator, or open to anyone) when adding it`,
      );
    const authenticate = access && 'authenticate' in access ? access.authenticate : undefined;
    const handlers: grpc.UntypedServiceImplementation = {};
    for (const method of descriptor.methods) {
      const handler = (implementation as unknown as Record<string, AnyHandler>)[method.localName];
      if (typeof handler !== 'function')
        throw new Error(`${descriptor.typeName}: no handler for ${method.name}`);
      handlers[method.localName] = this.adapt(method, handler.bind(implementation), authenticate);
    }
    this.server.addService(grpcServiceDefinition(descriptor), handlers);
    this.serviceNames.push(descriptor.typeName);
    this.health.setStatus(descriptor.typeName, 'NOT_SERVING');
    return this;
  }

  /**
   * Binds `host:port` (port 0 picks a free one) and returns the bound port. With `serving: false`
   * health stays NOT_SERVING until `announceServing()`, so services can be added after binding.
   * `credentials` (TLS, known only once files are read at start) take the place of the server's own.
   */
  async listen(
    address: string,
    options: { serving?: boolean; credentials?: grpc.ServerCredentials } = {},
  ): Promise<number> {
    const port = await new Promise<number>((resolve, reject) => {
      this.server.bindAsync(
        address,
        options.credentials ?? this.options.credentials ?? grpc.ServerCredentials.createInsecure(),
        (error, bound) => (error ? reject(error) : resolve(bound)),
      );
    });
    this.listening = true;
    if (options.serving !== false) this.setServing('SERVING');
    return port;
  }

  /** Health turns SERVING for the server and every service added so far. */
  announceServing(): void {
    if (this.listening) this.setServing('SERVING');
  }

  /**
   * Stops taking calls (health NOT_SERVING first), lets running calls finish for `graceMs`, then cancels
   * what is left.
   */
  async shutdown(graceMs = 10_000): Promise<void> {
    this.setServing('NOT_SERVING');
    if (!this.listening) {
      this.server.forceShutdown();
      return;
    }
    this.listening = false;
    const graceful = new Promise<void>((resolve) => this.server.tryShutdown(() => resolve()));
    let timer: NodeJS.Timeout | undefined;
    const expired = new Promise<'expired'>((resolve) => {
      timer = setTimeout(() => resolve('expired'), graceMs);
    });
    const outcome = await Promise.race([graceful, expired]);
    clearTimeout(timer);
    if (outcome === 'expired') {
      for (const call of this.liveCalls)
        call.abort(new RpcError(GrpcStatus.UNAVAILABLE, 'server shutting down'));
      this.server.forceShutdown();
    }
  }

  private setServing(status: 'SERVING' | 'NOT_SERVING'): void {
    this.health.setStatus('', status);
    for (const name of this.serviceNames) this.health.setStatus(name, status);
  }

  private adapt(
    method: DescMethod,
    handler: AnyHandler,
    authenticate: CallAuthenticator | undefined,
  ): grpc.UntypedHandleCall {
    const run = (
      call: GrpcCall,
      input: unknown,
      caller: string | undefined,
      end: (code: GrpcStatus) => void,
    ): StartedCall => {
      const abort = new AbortController();
      this.liveCalls.add(abort);
      (call as NodeJS.EventEmitter).on('cancelled', () =>
        abort.abort(new RpcError(GrpcStatus.CANCELLED, 'call cancelled by the caller')),
      );
      const context = contextOf(method, call, abort.signal, caller);
      const scope = this.options.openCallScope?.(context);
      const runInContext = this.options.runInContext;
      const within = <T>(work: () => T): T => {
        const inContext = runInContext ? () => runInContext(context, work) : work;
        return scope ? scope.run(inContext) : inContext();
      };
      const result = within(() => handler(input, context));
      const streamed = method.methodKind === 'server_streaming' || method.methodKind === 'bidi_streaming';
      return {
        context,
        result:
          streamed && (runInContext || scope)
            ? iterateWithin(result as AsyncIterable<unknown>, within)
            : result,
        done: (code) => {
          this.liveCalls.delete(abort);
          scope?.end(code);
          end(code);
        },
      };
    };
    // The caller is authenticated before anything of the call is read or run; a refused call never
    // reaches the handler.
    const admit = (
      call: GrpcCall,
      end: (code: GrpcStatus) => void,
      proceed: (caller: string | undefined) => void,
      refuse: (status: Partial<grpc.StatusObject>) => void,
    ): void => {
      if (!authenticate) {
        proceed(undefined);
        return;
      }
      // The peer is read only if needed (a refusal's log): it costs a socket lookup.
      const credentials: CallCredentials = {
        method,
        metadata: call.metadata,
        get peer() {
          return call.getPeer();
        },
      };
      const refused = (error: unknown) => {
        const status = this.refusal(error, credentials);
        refuse(status);
        end(status.code ?? GrpcStatus.UNAUTHENTICATED);
      };
      let outcome: string | Promise<string>;
      try {
        outcome = authenticate(credentials);
      } catch (error) {
        refused(error);
        return;
      }
      if (typeof outcome === 'string') proceed(outcome);
      else
        outcome.then((caller) => {
          // The caller may have given up while its credentials were checked: nothing to run then.
          if (call.cancelled) end(GrpcStatus.CANCELLED);
          else proceed(caller);
        }, refused);
    };

    switch (method.methodKind) {
      case 'unary':
        return (call: grpc.ServerUnaryCall<object, object>, callback: grpc.sendUnaryData<object>) => {
          const end = this.callEnder(method);
          admit(
            call,
            end,
            (caller) => this.respondOnce(method, run(call, call.request, caller, end), callback),
            (status) => callback(status),
          );
        };
      case 'client_streaming':
        return (call: grpc.ServerReadableStream<object, object>, callback: grpc.sendUnaryData<object>) => {
          const end = this.callEnder(method);
          admit(
            call,
            end,
            (caller) => this.respondOnce(method, run(call, readRequests(call), caller, end), callback),
            (status) => callback(status),
          );
        };
      case 'server_streaming':
        return (call: grpc.ServerWritableStream<object, object>) => {
          const end = this.callEnder(method);
          admit(
            call,
            end,
            (caller) => void this.respondStream(method, run(call, call.request, caller, end), call),
            (status) => call.emit('error', status),
          );
        };
      case 'bidi_streaming':
        return (call: grpc.ServerDuplexStream<object, object>) => {
          const end = this.callEnder(method);
          admit(
            call,
            end,
            (caller) => void this.respondStream(method, run(call, readRequests(call), caller, end), call),
            (status) => call.emit('error', status),
          );
        };
    }
  }

  /** Reports a call's end to `onCallEnd`, timed from now. */
  private callEnder(method: DescMethod): (code: GrpcStatus) => void {
    const onCallEnd = this.options.onCallEnd;
    if (!onCallEnd) return () => undefined;
    const arrived = performance.now();
    return (code) => onCallEnd({ method, code, seconds: (performance.now() - arrived) / 1000 });
  }

  /**
   * The answer to a refused call: the authenticator's RpcError as it is, anything else (a bug in the
   * authenticator) UNAUTHENTICATED with nothing of the error; either is reported first.
   */
  private refusal(error: unknown, call: CallCredentials): Partial<grpc.StatusObject> {
    this.options.onRefused?.(error, call);
    const rpcError =
      error instanceof RpcError ? error : new RpcError(GrpcStatus.UNAUTHENTICATED, 'call not authenticated');
    return { code: rpcError.status, details: rpcError.message, metadata: rpcError.toMetadata() };
  }

  private respondOnce(method: DescMethod, started: StartedCall, callback: grpc.sendUnaryData<object>): void {
    Promise.resolve(started.result).then(
      (response) => {
        started.done(GrpcStatus.OK);
        callback(null, create(method.output, response as never));
      },
      (error: unknown) => {
        const status = this.toServiceError(error, started.context);
        started.done(status.code);
        callback(status);
      },
    );
  }

  private async respondStream(
    method: DescMethod,
    started: StartedCall,
    call: grpc.ServerWritableStream<object, object> | grpc.ServerDuplexStream<object, object>,
  ): Promise<void> {
    const { signal } = started.context;
    let code: GrpcStatus = GrpcStatus.OK;
    try {
      for await (const response of started.result as AsyncIterable<unknown>) {
        if (signal.aborted) break;
        if (!call.write(create(method.output, response as never))) await drained(call, signal);
      }
      if (!signal.aborted) call.end();
    } catch (error) {
      if (!signal.aborted) {
        const status = this.toServiceError(error, started.context);
        code = status.code;
        call.emit('error', status);
      }
    } finally {
      // Cut short: cancelled by the caller, or by a shutdown whose grace ran out.
      if (signal.aborted)
        code = signal.reason instanceof RpcError ? signal.reason.status : GrpcStatus.CANCELLED;
      started.done(code);
    }
  }

  private toServiceError(
    error: unknown,
    context: CallContext,
  ): Partial<grpc.StatusObject> & { code: GrpcStatus } {
    let rpcError = error instanceof RpcError ? error : this.options.mapError?.(error);
    if (!rpcError) {
      this.options.onUnexpectedError?.(error, context);
      rpcError = new RpcError(GrpcStatus.INTERNAL, 'internal error');
    }
    return { code: rpcError.status, details: rpcError.message, metadata: rpcError.toMetadata() };
  }
}

function contextOf(
  method: DescMethod,
  call: GrpcCall,
  signal: AbortSignal,
  caller: string | undefined,
): CallContext {
  const sentId = call.metadata.get(METADATA.requestId)[0];
  const deadline = call.getDeadline();
  return {
    method,
    requestId:
      typeof sentId === 'string' && sentId.length > 0 && sentId.length <= 128 ? sentId : randomUUID(),
    metadata: call.metadata,
    deadline:
      deadline instanceof Date ? deadline : Number.isFinite(deadline) ? new Date(deadline) : undefined,
    signal,
    peer: call.getPeer(),
    ...(caller === undefined ? {} : { caller }),
  };
}

/**
 * A streamed answer read inside `within`: a generator handler's body runs on each `next()`, not when it
 * is called, so each step is taken in the call's context (its request id, its trace span).
 */
function iterateWithin(
  answer: AsyncIterable<unknown>,
  within: <T>(work: () => T) => T,
): AsyncIterable<unknown> {
  return {
    [Symbol.asyncIterator]() {
      const iterator = within(() => answer[Symbol.asyncIterator]());
      return {
        next: () => within(() => iterator.next()),
        return: (value?: unknown) =>
          within(() => iterator.return?.(value) ?? Promise.resolve({ done: true as const, value })),
      };
    },
  };
}

/** The caller's messages as an async iterable that fails with CANCELLED when the caller goes away. */
function readRequests(
  call: grpc.ServerReadableStream<object, object> | grpc.ServerDuplexStream<object, object>,
): AsyncIterable<object> {
  const queue = new AsyncQueue<object>();
  // grpc-js can still deliver a buffered message after it reported the call's error or cancellation;
  // the stream is over for the handler by then, and a late message must not crash the process.
  call.on('data', (message: object) => {
    if (!queue.isEnded) queue.push(message);
  });
  call.on('end', () => queue.end());
  call.on('error', (error: unknown) => queue.fail(error));
  call.on('cancelled', () => queue.fail(new RpcError(GrpcStatus.CANCELLED, 'call cancelled by the caller')));
  return queue;
}

async function drained(stream: NodeJS.EventEmitter, signal: AbortSignal): Promise<void> {
  try {
    await once(stream, 'drain', { signal });
  } catch {
    // aborted: the caller is gone, the loop stops on the next check
  }
}
