import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { waitFor } from '@svc/testkit';
import {
  closeClient,
  createClient,
  GrpcServer,
  GrpcStatus,
  METADATA,
  RpcError,
  type EndedCall,
  type ServiceClient,
} from '../src/index.js';
import { EchoService } from './gen/svc/testing/v1/echo_pb.js';

// `onCallEnd` hears every call once, with the status its caller got: what the runner's gRPC metrics count.

type EchoClient = ServiceClient<(typeof EchoService)['method']>;

const ended: EndedCall[] = [];
let server: GrpcServer;
let client: EchoClient;
let stranger: EchoClient;

function failIfAsked(code: string): void {
  if (code === 'boom') throw new Error('a bug');
  if (code) throw new RpcError(GrpcStatus.FAILED_PRECONDITION, code, code);
}

beforeAll(async () => {
  server = new GrpcServer({ onCallEnd: (call) => ended.push(call) }).add(
    EchoService,
    {
      async echo(request) {
        failIfAsked(request.failWithCode);
        return { text: request.text };
      },
      async *echoServerStream(request, context) {
        for (let index = 0; index < request.repeat; index++) {
          if (index === 1) failIfAsked(request.failWithCode);
          await new Promise((resolve) => setTimeout(resolve, request.delayMs));
          if (context.signal.aborted) return;
          yield { text: request.text, index };
        }
      },
      async echoClientStream() {
        return { text: '' };
      },
      async *echoBidi() {},
    },
    {
      authenticate: ({ metadata }) => {
        if (metadata.get(METADATA.authorization)[0] === 'Bearer ok') return 'caller';
        throw new RpcError(GrpcStatus.UNAUTHENTICATED, 'no token');
      },
    },
  );
  const address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
  client = createClient(EchoService, address, {
    defaultMetadata: () => ({ [METADATA.authorization]: 'Bearer ok' }),
  });
  stranger = createClient(EchoService, address);
});

afterAll(async () => {
  closeClient(client);
  closeClient(stranger);
  await server.shutdown(100);
});

/** The calls that ended since `from`, as method and status name. */
function endedSince(from: number): string[] {
  return ended.slice(from).map((call) => `${call.method.name} ${GrpcStatus[call.code]}`);
}

describe('onCallEnd', () => {
  it('hears a unary call end OK, with its method and time', async () => {
    const from = ended.length;
    await client.echo({ text: 'hi' });
    await waitFor(() => ended.length > from || undefined, { what: 'the call ended' });
    expect(endedSince(from)).toEqual(['Echo OK']);
    expect(ended[from]!.method.parent.typeName).toBe('svc.testing.v1.EchoService');
    expect(ended[from]!.seconds).toBeGreaterThan(0);
  });

  it('hears the status of a failed call: the error mapped, INTERNAL for an unexpected one', async () => {
    const from = ended.length;
    await expect(client.echo({ text: 'x', failWithCode: 'nope' })).rejects.toThrow(RpcError);
    await expect(client.echo({ text: 'x', failWithCode: 'boom' })).rejects.toThrow(RpcError);
    await waitFor(() => ended.length >= from + 2 || undefined, { what: 'both calls ended' });
    expect(endedSince(from)).toEqual(['Echo FAILED_PRECONDITION', 'Echo INTERNAL']);
  });

  it('hears a refused call as UNAUTHENTICATED, though no handler ran', async () => {
    const from = ended.length;
    await expect(stranger.echo({ text: 'x' })).rejects.toThrow(RpcError);
    await waitFor(() => ended.length > from || undefined, { what: 'the refusal' });
    expect(endedSince(from)).toEqual(['Echo UNAUTHENTICATED']);
  });

  it('hears a stream end OK, or with the error that ended it', async () => {
    const from = ended.length;
    const replies = [];
    for await (const reply of client.echoServerStream({ text: 's', repeat: 2 })) replies.push(reply);
    expect(replies).toHaveLength(2);
    const failing = async () => {
      for await (const reply of client.echoServerStream({ text: 's', repeat: 3, failWithCode: 'late' }))
        void reply;
    };
    await expect(failing()).rejects.toThrow(RpcError);
    await waitFor(() => ended.length >= from + 2 || undefined, { what: 'both streams ended' });
    expect(endedSince(from)).toEqual(['EchoServerStream OK', 'EchoServerStream FAILED_PRECONDITION']);
  });

  it('hears a stream its caller left as CANCELLED, once', async () => {
    const from = ended.length;
    const controller = new AbortController();
    const reading = (async () => {
      for await (const reply of client.echoServerStream(
        { text: 'slow', repeat: 100, delayMs: 20 },
        { signal: controller.signal },
      )) {
        void reply;
        controller.abort();
      }
    })();
    await expect(reading).rejects.toThrow();
    await waitFor(() => ended.length > from || undefined, { what: 'the stream ended' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(endedSince(from)).toEqual(['EchoServerStream CANCELLED']);
  });
});
