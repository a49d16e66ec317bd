import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import {
  AsyncQueue,
  closeClient,
  createClient,
  GrpcServer,
  GrpcStatus,
  METADATA,
  RpcError,
  type CallAuthenticator,
  type CallCredentials,
  type ServiceClient,
} from '../src/index.js';
import { EchoService } from './gen/svc/testing/v1/echo_pb.js';

// A service added with an authenticator: every call, of every kind, is authenticated before its handler
// runs; a refused call never reaches the handler and its caller hears the authenticator's status.

type EchoClient = ServiceClient<(typeof EchoService)['method']>;

/** Callers by the token they send: plain and promised answers, refusals and broken authenticators. */
const authenticate: CallAuthenticator = ({ metadata }) => {
  const sent = metadata.get(METADATA.authorization)[0];
  switch (sent) {
    case 'Bearer sync-ok':
      return 'sync-caller';
    case 'Bearer async-ok':
      return new Promise((resolve) => setTimeout(() => resolve('async-caller'), 5));
    case 'Bearer async-no':
      return Promise.reject(new RpcError(GrpcStatus.UNAUTHENTICATED, 'token refused: async'));
    case 'Bearer bug':
      throw new Error('authenticator bug holding hunter2');
    case 'Bearer async-bug':
      return Promise.reject(new Error('authenticator bug holding hunter2'));
    default:
      throw new RpcError(GrpcStatus.UNAUTHENTICATED, 'token refused: none');
  }
};

const handled: string[] = [];
const refusals: Array<{ error: unknown; call: CallCredentials }> = [];

function server(): GrpcServer {
  return new GrpcServer({
    requireAccess: true,
    onRefused: (error, call) => refusals.push({ error, call }),
  }).add(
    EchoService,
    {
      async echo(request, context) {
        handled.push(`echo ${request.text}`);
        return { text: `${request.text} from ${context.caller}` };
      },
      async *echoServerStream(request, context) {
        handled.push(`server stream ${request.text}`);
        for (let index = 0; index < request.repeat; index++)
          yield { text: `${request.text} from ${context.caller}`, index };
      },
      async echoClientStream(requests, context) {
        handled.push('client stream');
        const texts: string[] = [];
        for await (const request of requests) texts.push(request.text);
        return { text: `${texts.join(',')} from ${context.caller}` };
      },
      async *echoBidi(requests, context) {
        handled.push('bidi');
        for await (const request of requests) yield { text: `${request.text} from ${context.caller}` };
      },
    },
    { authenticate },
  );
}

async function* fromArray<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

describe('a service added with an authenticator', () => {
  let echo: GrpcServer;
  let address: string;
  const clients: EchoClient[] = [];
  const clientWith = (token?: string): EchoClient => {
    const client = createClient(EchoService, address, {
      defaultMetadata: () => ({ [METADATA.authorization]: token && `Bearer ${token}` }),
    });
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    echo = server();
    address = `127.0.0.1:${await echo.listen('127.0.0.1:0')}`;
  });

  afterAll(async () => {
    clients.forEach((client) => closeClient(client));
    await echo.shutdown(100);
  });

  it('runs the handler for an accepted caller, named in the call context, whether the answer is plain or a promise', async () => {
    expect((await clientWith('sync-ok').echo({ text: 'a' })).text).toBe('a from sync-caller');
    expect((await clientWith('async-ok').echo({ text: 'b' })).text).toBe('b from async-caller');
  });

  it('refuses every kind of call before its handler runs, with the status and message the authenticator chose', async () => {
    const before = handled.length;
    const client = clientWith(undefined);
    const refused = async (call: Promise<unknown>) => {
      const error = (await call.catch((e: unknown) => e)) as RpcError;
      expect(error).toBeInstanceOf(RpcError);
      expect(error.status).toBe(GrpcStatus.UNAUTHENTICATED);
      expect(error.message).toBe('token refused: none');
    };
    await refused(client.echo({ text: 'x' }));
    await refused(collect(client.echoServerStream({ text: 'x', repeat: 3 })));
    await refused(client.echoClientStream(fromArray([{ text: 'x' }, { text: 'y' }])));
    const outbound = new AsyncQueue<{ text: string }>();
    outbound.push({ text: 'x' });
    await refused(collect(client.echoBidi(outbound)));
    outbound.end();
    const asyncRefusal = (await clientWith('async-no')
      .echo({ text: 'x' })
      .catch((e: unknown) => e)) as RpcError;
    expect(asyncRefusal.status).toBe(GrpcStatus.UNAUTHENTICATED);
    expect(asyncRefusal.message).toBe('token refused: async');
    expect(handled.length).toBe(before);
  });

  it('serves every kind of call to an accepted caller', async () => {
    const client = clientWith('async-ok');
    expect((await collect(client.echoServerStream({ text: 's', repeat: 2 }))).map((r) => r.index)).toEqual([
      0, 1,
    ]);
    expect((await client.echoClientStream(fromArray([{ text: 'a' }, { text: 'b' }]))).text).toBe(
      'a,b from async-caller',
    );
    const outbound = new AsyncQueue<{ text: string }>();
    const inbound = client.echoBidi(outbound)[Symbol.asyncIterator]();
    outbound.push({ text: 'one' });
    expect((await inbound.next()).value?.text).toBe('one from async-caller');
    outbound.end();
    expect((await inbound.next()).done).toBe(true);
  });

  it('answers a failing authenticator UNAUTHENTICATED with nothing of its error, and reports it', async () => {
    for (const token of ['bug', 'async-bug']) {
      const before = refusals.length;
      const error = (await clientWith(token)
        .echo({ text: 'x' })
        .catch((e: unknown) => e)) as RpcError;
      expect(error.status).toBe(GrpcStatus.UNAUTHENTICATED);
      expect(error.message).not.toContain('hunter2');
      expect(error.appCode).toBeUndefined();
      expect(refusals.length).toBe(before + 1);
      expect(String(refusals.at(-1)?.error)).toContain('authenticator bug');
      expect(refusals.at(-1)?.call.method.name).toBe('Echo');
    }
  });

  it('leaves grpc.health.v1 open: probes carry no credentials', async () => {
    const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');
    const health = new HealthClient(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
      check(
        request: { service: string },
        callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
      ): void;
    };
    try {
      for (const service of ['', 'svc.testing.v1.EchoService']) {
        const status = await new Promise<string>((resolve, reject) =>
          health.check({ service }, (error, response) =>
            error ? reject(error) : resolve(String(response?.status)),
          ),
        );
        expect(status).toBe('SERVING');
      }
    } finally {
      health.close();
    }
  });
});

describe('a server that requires access', () => {
  const handlers = {
    echo: async () => ({}),
    echoServerStream: async function* () {},
    echoClientStream: async () => ({}),
    echoBidi: async function* () {},
  };

  it('refuses a service added without saying who may call it', () => {
    expect(() => new GrpcServer({ requireAccess: true }).add(EchoService, handlers)).toThrow(
      /svc.testing.v1.EchoService: say who may call it/,
    );
  });

  it('serves a service added open to anyone, with no caller in the context', async () => {
    const open = new GrpcServer({ requireAccess: true }).add(
      EchoService,
      { ...handlers, echo: async (request, context) => ({ text: `${request.text} from ${context.caller}` }) },
      { open: true },
    );
    const port = await open.listen('127.0.0.1:0');
    const client = createClient(EchoService, `127.0.0.1:${port}`);
    try {
      expect((await client.echo({ text: 'hi' })).text).toBe('hi from undefined');
    } finally {
      closeClient(client);
      await open.shutdown(100);
    }
  });
});
