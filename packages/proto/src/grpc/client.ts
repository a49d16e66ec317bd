import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import {
  create,
  fromBinary,
  toBinary,
  type DescMessage,
  type DescMethod,
  type DescService,
} from '@bufbuild/protobuf';
import type { GenService } from '@bufbuild/protobuf/codegenv2';
import * as grpc from '@grpc/grpc-js';
import { METADATA, RpcError } from './errors.js';
import { stopKeepaliveAfterGoaway } from './goaway-keepalive.js';
import { DEFAULT_MAX_MESSAGE_BYTES } from './server.js';
import type { CallOptions, GenServiceMethods, ServiceClient } from './types.js';

export interface ClientOptions {
  credentials?: grpc.ChannelCredentials;
  channelOptions?: grpc.ChannelOptions;
  /** Metadata added to every call, e.g. the request id of the logging context the call is made from. */
  defaultMetadata?: () => Record<string, string | undefined>;
  /** Deadline for calls that set none; streams (server, client, bidi) get none unless asked. */
  defaultUnaryTimeoutMs?: number;
}

const channels = new WeakMap<object, grpc.Client>();

stopKeepaliveAfterGoaway();

/**
 * A typed client for a protobuf-es service over @grpc/grpc-js. Unary calls return promises, streams are
 * async iterables; a failed call rejects with an RpcError carrying the server's application code.
 */
export function createClient<S extends GenServiceMethods>(
  service: GenService<S>,
  address: string,
  options: ClientOptions = {},
): ServiceClient<S> {
  const descriptor = service as unknown as DescService;
  const channel = new grpc.Client(address, options.credentials ?? grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': DEFAULT_MAX_MESSAGE_BYTES,
    'grpc.max_send_message_length': DEFAULT_MAX_MESSAGE_BYTES,
    'grpc.keepalive_time_ms': 30_000,
    'grpc.keepalive_timeout_ms': 10_000,
    ...options.channelOptions,
  });
  const client: Record<string, unknown> = {};
  for (const method of descriptor.methods) client[method.localName] = clientMethod(channel, method, options);
  channels.set(client, channel);
  return client as ServiceClient<S>;
}

/** Closes the channel behind a client made by `createClient`. */
export function closeClient(client: object): void {
  channels.get(client)?.close();
}

/** Resolves once the client's channel is connected, or rejects when `timeoutMs` passes first. */
export function waitForClientReady(client: object, timeoutMs: number): Promise<void> {
  const channel = channels.get(client);
  if (!channel) return Promise.reject(new Error('not a client made by createClient'));
  return new Promise((resolve, reject) =>
    channel.waitForReady(Date.now() + timeoutMs, (error) => (error ? reject(error) : resolve())),
  );
}

function clientMethod(channel: grpc.Client, method: DescMethod, options: ClientOptions): unknown {
  const path = `/${method.parent.typeName}/${method.name}`;
  const serialize = (value: object) => encode(method.input, value);
  const deserialize = (bytes: Buffer) => fromBinary(method.output, bytes);
  const prepare = (callOptions: CallOptions = {}, unary: boolean) => ({
    metadata: metadataOf(options, callOptions),
    grpcOptions: grpcCallOptions(callOptions, unary ? options.defaultUnaryTimeoutMs : undefined),
  });

  switch (method.methodKind) {
    case 'unary':
      return (request: object, callOptions?: CallOptions) => {
        const { metadata, grpcOptions } = prepare(callOptions, true);
        return new Promise((resolve, reject) => {
          const call = channel.makeUnaryRequest(
            path,
            serialize,
            deserialize,
            request,
            metadata,
            grpcOptions,
            (error, response) => (error ? reject(RpcError.fromServiceError(error)) : resolve(response)),
          );
          cancelOnAbort(call, callOptions?.signal);
        });
      };
    case 'server_streaming':
      return (request: object, callOptions?: CallOptions) => {
        const { metadata, grpcOptions } = prepare(callOptions, false);
        const call = channel.makeServerStreamRequest(
          path,
          serialize,
          deserialize,
          request,
          metadata,
          grpcOptions,
        );
        cancelOnAbort(call, callOptions?.signal);
        return readResponses(call);
      };
    case 'client_streaming':
      return (requests: AsyncIterable<object>, callOptions?: CallOptions) => {
        const { metadata, grpcOptions } = prepare(callOptions, false);
        return new Promise((resolve, reject) => {
          const call = channel.makeClientStreamRequest(
            path,
            serialize,
            deserialize,
            metadata,
            grpcOptions,
            (error, response) => (error ? reject(RpcError.fromServiceError(error)) : resolve(response)),
          );
          cancelOnAbort(call, callOptions?.signal);
          void writeRequests(call, requests);
        });
      };
    case 'bidi_streaming':
      return (requests: AsyncIterable<object>, callOptions?: CallOptions) => {
        const { metadata, grpcOptions } = prepare(callOptions, false);
        const call = channel.makeBidiStreamRequest(path, serialize, deserialize, metadata, grpcOptions);
        cancelOnAbort(call, callOptions?.signal);
        void writeRequests(call, requests);
        return readResponses(call);
      };
  }
}

function encode(schema: DescMessage, value: object): Buffer {
  const bytes = toBinary(schema, create(schema, value as never));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function metadataOf(options: ClientOptions, callOptions: CallOptions): grpc.Metadata {
  const metadata = new grpc.Metadata();
  const entries = { ...options.defaultMetadata?.(), ...callOptions.metadata };
  for (const [key, value] of Object.entries(entries)) if (value !== undefined) metadata.set(key, value);
  const requestId = callOptions.requestId ?? entries[METADATA.requestId] ?? randomUUID();
  metadata.set(METADATA.requestId, requestId);
  return metadata;
}

function grpcCallOptions(callOptions: CallOptions, defaultTimeoutMs: number | undefined): grpc.CallOptions {
  if (callOptions.deadline) return { deadline: callOptions.deadline };
  const timeoutMs = callOptions.timeoutMs ?? defaultTimeoutMs;
  return timeoutMs === undefined ? {} : { deadline: new Date(Date.now() + timeoutMs) };
}

function cancelOnAbort(call: grpc.Call, signal: AbortSignal | undefined): void {
  if (!signal) return;
  if (signal.aborted) {
    call.cancel();
    return;
  }
  const onAbort = () => call.cancel();
  signal.addEventListener('abort', onAbort, { once: true });
  call.on('status', () => signal.removeEventListener('abort', onAbort));
}

async function* readResponses(
  call: grpc.ClientReadableStream<object> | grpc.ClientDuplexStream<object, object>,
): AsyncGenerator<object> {
  let finished = false;
  call.on('status', () => {
    finished = true;
  });
  try {
    for await (const message of call) yield message as object;
    finished = true;
  } catch (error) {
    finished = true;
    throw RpcError.fromServiceError(error as grpc.ServiceError);
  } finally {
    // The consumer stopped reading early: tell the server instead of leaving the call open.
    if (!finished) call.cancel();
  }
}

async function writeRequests(
  call: grpc.ClientWritableStream<object> | grpc.ClientDuplexStream<object, object>,
  requests: AsyncIterable<object>,
): Promise<void> {
  const ended = new AbortController();
  call.on('status', () => ended.abort());
  try {
    for await (const request of requests) {
      if (ended.signal.aborted) return;
      if (!call.write(request)) await once(call, 'drain', { signal: ended.signal });
    }
    if (!ended.signal.aborted) call.end();
  } catch {
    // Either the call ended while waiting for drain, or the request source failed and the call
    // cannot complete meaningfully: cancel it so the server stops too.
    if (!ended.signal.aborted) call.cancel();
  }
}
