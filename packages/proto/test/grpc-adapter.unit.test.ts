import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { setTimeout as sleep } from 'node:timers/promises';
import { waitFor } from '@svc/testkit';
import {
  AsyncQueue,
  closeClient,
  createClient,
  GrpcServer,
  GrpcStatus,
  RpcError,
  type CallContext,
  type ServiceClient,
} from '../src/index.js';
import { EchoService, type EchoRequest } from './gen/svc/testing/v1/echo_pb.js';

/** Resolves with the signal state of server calls, so tests can see what the server observed. */
class ServerProbe {
  aborted: Array<{ requestId: string; reason: unknown }> = [];
  unexpected: unknown[] = [];
  contexts: CallContext[] = [];
}

function failIfAsked(request: EchoRequest): void {
  if (request.failWithCode === 'boom') throw new Error('database password is hunter2');
  if (request.failWithCode === 'domain') throw new DomainError('spend cap reached');
  if (request.failWithCode)
    throw new RpcError(
      GrpcStatus.FAILED_PRECONDITION,
      `failed: ${request.failWithCode}`,
      request.failWithCode,
      {
        spend_cap_wei: '1000',
        note: 'résumé ✓',
      },
    );
}

class DomainError extends Error {}

async function wait(ms: number, signal: AbortSignal): Promise<void> {
  if (ms > 0) await sleep(ms, undefined, { signal });
}

function echoServer(probe: ServerProbe): GrpcServer {
  const watchAbort = (context: CallContext) => {
    probe.contexts.push(context);
    context.signal.addEventListener('abort', () =>
      probe.aborted.push({ requestId: context.requestId, reason: context.signal.reason }),
    );
  };
  return new GrpcServer({
    mapError: (error) =>
      error instanceof DomainError
        ? new RpcError(GrpcStatus.FAILED_PRECONDITION, error.message, 'spend_cap_exceeded')
        : undefined,
    onUnexpectedError: (error) => probe.unexpected.push(error),
  }).add(EchoService, {
    async echo(request, context) {
      watchAbort(context);
      await wait(request.delayMs, context.signal);
      failIfAsked(request);
      return { text: request.text, requestId: context.requestId };
    },
    async *echoServerStream(request, context) {
      watchAbort(context);
      for (let index = 0; index < request.repeat; index++) {
        await wait(request.delayMs, context.signal);
        if (index === 2) failIfAsked(request);
        yield { text: `${request.text}#${index}`, index, requestId: context.requestId };
      }
    },
    async echoClientStream(requests, context) {
      watchAbort(context);
      const texts: string[] = [];
      for await (const request of requests) {
        failIfAsked(request);
        texts.push(request.text);
      }
      return { text: texts.join(','), index: texts.length, requestId: context.requestId };
    },
    async *echoBidi(requests, context) {
      watchAbort(context);
      let index = 0;
      for await (const request of requests) {
        failIfAsked(request);
        yield { text: request.text.toUpperCase(), index: index++, requestId: context.requestId };
      }
    },
  });
}

async function* fromArray<T>(items: T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

async function collect<T>(iterable: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of iterable) items.push(item);
  return items;
}

describe('gRPC adapter over a real loopback socket', () => {
  const probe = new ServerProbe();
  let server: GrpcServer;
  let address: string;
  let client: ServiceClient<(typeof EchoService)['method']>;

  beforeAll(async () => {
    server = echoServer(probe);
    const port = await server.listen('127.0.0.1:0');
    address = `127.0.0.1:${port}`;
    client = createClient(EchoService, address, {
      defaultMetadata: () => ({ 'x-request-id': 'from-context' }),
    });
  });

  afterAll(async () => {
    closeClient(client);
    await server.shutdown(100);
  });

  describe('unary', () => {
    it('round-trips a message', async () => {
      const response = await client.echo({ text: 'hello' });
      expect(response.text).toBe('hello');
      expect(response.$typeName).toBe('svc.testing.v1.EchoResponse');
    });

    it('carries the request id in metadata: per call, else from the default metadata', async () => {
      expect((await client.echo({ text: 'a' }, { requestId: 'req-123' })).requestId).toBe('req-123');
      expect((await client.echo({ text: 'b' })).requestId).toBe('from-context');
    });

    it('mints a request id when the caller sends none', async () => {
      const bare = createClient(EchoService, address);
      try {
        const first = await bare.echo({ text: 'x' });
        const second = await bare.echo({ text: 'y' });
        expect(first.requestId).toMatch(/^[0-9a-f-]{36}$/);
        expect(first.requestId).not.toBe(second.requestId);
      } finally {
        closeClient(bare);
      }
    });

    it('maps an RpcError to its status, application code and details', async () => {
      const error = await client
        .echo({ text: 'x', failWithCode: 'api_key_revoked' })
        .catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RpcError);
      const rpcError = error as RpcError;
      expect(rpcError.status).toBe(GrpcStatus.FAILED_PRECONDITION);
      expect(rpcError.appCode).toBe('api_key_revoked');
      expect(rpcError.message).toBe('failed: api_key_revoked');
      expect(rpcError.details).toEqual({ spend_cap_wei: '1000', note: 'résumé ✓' });
    });

    it('maps domain errors through mapError', async () => {
      const error = (await client
        .echo({ text: 'x', failWithCode: 'domain' })
        .catch((e: unknown) => e)) as RpcError;
      expect(error.status).toBe(GrpcStatus.FAILED_PRECONDITION);
      expect(error.appCode).toBe('spend_cap_exceeded');
    });

    it('hides unexpected errors behind INTERNAL and reports them to the server', async () => {
      const before = probe.unexpected.length;
      const error = (await client
        .echo({ text: 'x', failWithCode: 'boom' })
        .catch((e: unknown) => e)) as RpcError;
      expect(error.status).toBe(GrpcStatus.INTERNAL);
      expect(error.message).toBe('internal error');
      expect(error.message).not.toContain('hunter2');
      expect(error.appCode).toBeUndefined();
      expect(probe.unexpected.length).toBe(before + 1);
    });

    it('fails with DEADLINE_EXCEEDED and aborts the handler when the deadline passes', async () => {
      const requestId = 'deadline-1';
      const error = (await client
        .echo({ text: 'slow', delayMs: 2000 }, { timeoutMs: 100, requestId })
        .catch((e: unknown) => e)) as RpcError;
      expect(error.status).toBe(GrpcStatus.DEADLINE_EXCEEDED);
      await waitFor(() => probe.aborted.some((entry) => entry.requestId === requestId) || undefined, {
        what: `the handler of ${requestId} aborted`,
      });
      expect(probe.contexts.find((c) => c.requestId === requestId)?.deadline).toBeInstanceOf(Date);
    });

    it('cancels the call when the caller aborts, and the server handler sees it', async () => {
      const controller = new AbortController();
      const requestId = 'cancel-1';
      const pending = client.echo({ text: 'slow', delayMs: 2000 }, { signal: controller.signal, requestId });
      await waitFor(() => probe.contexts.some((c) => c.requestId === requestId) || undefined, {
        what: `the handler of ${requestId} called`,
      });
      controller.abort();
      const error = (await pending.catch((e: unknown) => e)) as RpcError;
      expect(error.status).toBe(GrpcStatus.CANCELLED);
      await waitFor(() => probe.aborted.some((entry) => entry.requestId === requestId) || undefined, {
        what: `the handler of ${requestId} aborted`,
      });
    });

    it('serves many concurrent calls on one channel', async () => {
      const responses = await Promise.all(
        Array.from({ length: 200 }, (_, i) => client.echo({ text: `n${i}`, delayMs: i % 5 })),
      );
      expect(responses.map((r) => r.text)).toEqual(Array.from({ length: 200 }, (_, i) => `n${i}`));
    });
  });

  describe('server streaming', () => {
    it('delivers every message in order', async () => {
      const responses = await collect(client.echoServerStream({ text: 's', repeat: 50 }));
      expect(responses.map((r) => r.index)).toEqual(Array.from({ length: 50 }, (_, i) => i));
      expect(responses[49]?.text).toBe('s#49');
    });

    it('delivers the messages sent before an error, then the error with its code', async () => {
      const received: number[] = [];
      const error = await (async () => {
        for await (const response of client.echoServerStream({
          text: 's',
          repeat: 5,
          failWithCode: 'job_failed',
        }))
          received.push(response.index);
      })().catch((e: unknown) => e);
      expect(received).toEqual([0, 1]);
      expect((error as RpcError).appCode).toBe('job_failed');
      expect((error as RpcError).status).toBe(GrpcStatus.FAILED_PRECONDITION);
    });

    it('cancels the server side when the consumer stops reading early', async () => {
      const requestId = 'early-break';
      for await (const response of client.echoServerStream(
        { text: 's', repeat: 1000, delayMs: 5 },
        { requestId },
      )) {
        if (response.index === 3) break;
      }
      await waitFor(() => probe.aborted.some((entry) => entry.requestId === requestId) || undefined, {
        what: `the handler of ${requestId} aborted`,
      });
    });

    it('applies a deadline to the whole stream', async () => {
      const error = await collect(
        client.echoServerStream({ text: 's', repeat: 100, delayMs: 20 }, { timeoutMs: 150 }),
      ).catch((e: unknown) => e);
      expect((error as RpcError).status).toBe(GrpcStatus.DEADLINE_EXCEEDED);
    });

    it('keeps order with a large burst that exercises flow control', async () => {
      const big = 'x'.repeat(64 * 1024);
      const responses = await collect(client.echoServerStream({ text: big, repeat: 300 }));
      expect(responses).toHaveLength(300);
      expect(responses.every((r, i) => r.index === i && r.text === `${big}#${i}`)).toBe(true);
    });
  });

  describe('client streaming', () => {
    it('aggregates every request', async () => {
      const response = await client.echoClientStream(fromArray(['a', 'b', 'c'].map((text) => ({ text }))));
      expect(response.text).toBe('a,b,c');
      expect(response.index).toBe(3);
    });

    it('reports a server error with its code', async () => {
      const error = await client
        .echoClientStream(fromArray([{ text: 'a' }, { text: 'b', failWithCode: 'invalid_request' }]))
        .catch((e: unknown) => e);
      expect((error as RpcError).appCode).toBe('invalid_request');
    });
  });

  describe('bidi streaming', () => {
    it('answers each message as it is pushed', async () => {
      const outbound = new AsyncQueue<{ text: string }>();
      const inbound = client.echoBidi(outbound)[Symbol.asyncIterator]();
      outbound.push({ text: 'one' });
      expect((await inbound.next()).value?.text).toBe('ONE');
      outbound.push({ text: 'two' });
      expect((await inbound.next()).value?.text).toBe('TWO');
      outbound.end();
      expect((await inbound.next()).done).toBe(true);
    });

    it('tells the server when the client cancels', async () => {
      const controller = new AbortController();
      const requestId = 'bidi-cancel';
      const outbound = new AsyncQueue<{ text: string }>();
      const inbound = client
        .echoBidi(outbound, { signal: controller.signal, requestId })
        [Symbol.asyncIterator]();
      outbound.push({ text: 'one' });
      await inbound.next();
      controller.abort();
      const error = await inbound.next().catch((e: unknown) => e);
      expect((error as RpcError).status).toBe(GrpcStatus.CANCELLED);
      await waitFor(() => probe.aborted.some((entry) => entry.requestId === requestId) || undefined, {
        what: `the handler of ${requestId} aborted`,
      });
    });
  });
});

describe('grpc.health.v1 and shutdown', () => {
  type HealthClient = grpc.Client & {
    check(
      request: { service: string },
      callback: (error: grpc.ServiceError | null, response?: { status: string }) => void,
    ): void;
    watch(request: { service: string }): grpc.ClientReadableStream<{ status: string }>;
  };
  const HealthClient = grpc.makeGenericClientConstructor(healthService, 'grpc.health.v1.Health');
  const check = (client: HealthClient, service: string) =>
    new Promise<string>((resolve, reject) =>
      client.check({ service }, (error, response) =>
        error ? reject(error) : resolve(String(response?.status)),
      ),
    );

  it('reports SERVING for the server and each service while listening, NOT_SERVING once shutting down', async () => {
    const server = echoServer(new ServerProbe());
    const port = await server.listen('127.0.0.1:0');
    const health = new HealthClient(
      `127.0.0.1:${port}`,
      grpc.credentials.createInsecure(),
    ) as unknown as HealthClient;
    const echo = createClient(EchoService, `127.0.0.1:${port}`);
    try {
      expect(await check(health, '')).toBe('SERVING');
      expect(await check(health, 'svc.testing.v1.EchoService')).toBe('SERVING');
      const unknown = await check(health, 'svc.unknown.v1.Nope').catch((e: grpc.ServiceError) => e.code);
      expect(unknown).toBe(GrpcStatus.NOT_FOUND);

      // A watcher (as a load balancer or a probe would) sees the server leave rotation when shutdown starts.
      const statuses: string[] = [];
      const watch = health.watch({ service: '' });
      watch.on('data', (update: { status: string }) => statuses.push(String(update.status)));
      watch.on('error', () => undefined);
      await waitFor(() => statuses.length === 1 || undefined, { what: 'the first health status' });

      // A call in flight when shutdown starts is allowed to finish within the grace period.
      const inFlight = echo.echo({ text: 'last', delayMs: 300 });
      await sleep(50);
      const stopping = server.shutdown(5000);
      await waitFor(() => statuses.length === 2 || undefined, { what: 'the health status of shutdown' });
      expect(statuses).toEqual(['SERVING', 'NOT_SERVING']);
      expect((await inFlight).text).toBe('last');
      watch.cancel();
      await stopping;
      const afterwards = await echo.echo({ text: 'late' }, { timeoutMs: 500 }).catch((e: unknown) => e);
      expect((afterwards as RpcError).status).toBeGreaterThan(0);
    } finally {
      health.close();
      closeClient(echo);
    }
  });

  it('cancels calls still running when the grace period ends', async () => {
    const probe = new ServerProbe();
    const server = echoServer(probe);
    const port = await server.listen('127.0.0.1:0');
    const echo = createClient(EchoService, `127.0.0.1:${port}`);
    try {
      const stuck = echo
        .echo({ text: 'stuck', delayMs: 10_000 }, { requestId: 'stuck' })
        .catch((e: unknown) => e);
      await waitFor(() => probe.contexts.some((c) => c.requestId === 'stuck') || undefined, {
        what: 'the stuck handler called',
      });
      const started = Date.now();
      await server.shutdown(200);
      expect(Date.now() - started).toBeLessThan(5000);
      expect(probe.aborted.some((entry) => entry.requestId === 'stuck')).toBe(true);
      expect(await stuck).toBeInstanceOf(RpcError);
    } finally {
      closeClient(echo);
    }
  });
});
