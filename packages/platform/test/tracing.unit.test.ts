import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { closeClient, createClient, type ServiceImpl } from '@svc/proto';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { startOtlpReceiver, waitFor, type OtlpReceiver, type ReceivedSpan } from '@svc/testkit';
import {
  createLogger,
  createServiceGrpcServer,
  currentTraceHeaders,
  decodeRecord,
  EmbeddedEventBus,
  encodeEvent,
  fromKafkaMessage,
  ConfigError,
  generateServiceTokenKeyPair,
  loadConfig,
  serviceClientOptions,
  ServiceIdentity,
  SpanKind,
  startSpan,
  startTracing,
  toKafkaMessage,
  tracingConfigShape,
  tracingSettings,
  withSpan,
  type Span,
  type TraceHeaders,
  type Tracing,
} from '../src/index.js';
import { sampleEvent, sampleTopic } from './events/fixtures.js';

// The W3C trace context crosses every boundary between the services: gRPC metadata (the server span of
// a call is a child of the caller's span) and event headers (the consumer's span a child of the
// publisher's). Spans go to an in-process OTLP/HTTP receiver, as a collector would get them.

const logger = createLogger({ service: 'tracing-test', level: 'silent' });
const identity = new ServiceIdentity('gateway', generateServiceTokenKeyPair().privateKey);
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/;

/** Starts a span, runs `work` in it, ends it; resolves with the span and what `work` returned. */
async function inSpan<T>(name: string, work: () => Promise<T>): Promise<{ span: Span; result: T }> {
  const span = startSpan(name, { kind: SpanKind.INTERNAL });
  try {
    return { span, result: await withSpan(span, work) };
  } finally {
    span.end();
  }
}

/** A settler whose every method records the trace headers it runs under, and a client of it. */
async function tracedSettler(seen: TraceHeaders[]) {
  const handlers = new Proxy(
    {},
    {
      get: () => async () => {
        seen.push(currentTraceHeaders());
        return { outcome: { case: 'refused', value: { message: 'traced' } } };
      },
    },
  ) as ServiceImpl<(typeof PaymentSettler)['method']>;
  const server = createServiceGrpcServer(logger).add(PaymentSettler, handlers, { open: true });
  const address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
  const client = createClient(
    PaymentSettler,
    address,
    serviceClientOptions({ identity, audience: 'payment-settler' }),
  );
  return {
    client,
    async close(): Promise<void> {
      closeClient(client);
      await server.shutdown(100);
    },
  };
}

describe('the tracing settings', () => {
  it('default to no endpoint, every trace, and the service named after the target', () => {
    expect(tracingSettings(loadConfig(tracingConfigShape, {}), 'gateway')).toEqual({
      endpoint: undefined,
      serviceName: 'gateway',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    const named = loadConfig(tracingConfigShape, {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
      OTEL_SERVICE_NAME: 'edge',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.25',
    });
    expect(tracingSettings(named, 'gateway')).toEqual({
      endpoint: 'http://collector:4318',
      serviceName: 'edge',
      sampler: 'parentbased_traceidratio',
      samplerRatio: 0.25,
    });
  });

  it('refuse an endpoint that is not http(s), an unknown sampler and a ratio above 1', () => {
    const refusal = (() => {
      try {
        loadConfig(tracingConfigShape, {
          OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317',
          OTEL_TRACES_SAMPLER: 'sometimes',
          OTEL_TRACES_SAMPLER_ARG: '2',
        });
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(refusal).toBeInstanceOf(ConfigError);
    expect((refusal as ConfigError).problems).toHaveLength(3);
  });
});

describe('with no OTLP endpoint', () => {
  it('records nothing and sends no trace context', async () => {
    const tracing = startTracing({
      endpoint: undefined,
      serviceName: 'off',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    expect(tracing.enabled).toBe(false);
    const seen: TraceHeaders[] = [];
    const { client, close } = await tracedSettler(seen);
    try {
      const { span } = await inSpan('caller', () => client.verifyPayment({ model: 'm' }));
      expect(span.isRecording()).toBe(false);
      expect(currentTraceHeaders()).toEqual({});
      expect(seen).toEqual([{}]);
    } finally {
      await close();
    }
  });
});

describe('with an OTLP endpoint', () => {
  let receiver: OtlpReceiver;
  let tracing: Tracing;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    tracing = startTracing({
      endpoint: receiver.endpoint,
      serviceName: 'tracing-test',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
  });

  afterAll(async () => {
    await tracing.shutdown();
    await receiver.close();
  });

  /** The exported spans whose parent is `parent`, once the exporter has sent some. */
  async function exportedChildrenOf(parent: Span): Promise<ReceivedSpan[]> {
    const { spanId } = parent.spanContext();
    await tracing.flush();
    return waitFor(
      () => {
        const children = receiver.spans().filter((span) => span.parentSpanId === spanId);
        return children.length > 0 ? children : undefined;
      },
      { what: `the children of span ${spanId} exported` },
    );
  }

  it('puts traceparent in the metadata of a call, and opens the server span as a child of the caller', async () => {
    const seen: TraceHeaders[] = [];
    const { client, close } = await tracedSettler(seen);
    try {
      const { span } = await inSpan('caller', () => client.verifyPayment({ model: 'm' }));
      const { traceId, spanId } = span.spanContext();

      const [serverSpan, ...others] = await exportedChildrenOf(span);
      expect(others).toEqual([]);
      expect(serverSpan).toMatchObject({
        service: 'tracing-test',
        traceId,
        parentSpanId: spanId,
        name: 'svc.payment.v1.PaymentSettler/VerifyPayment',
        kind: 2,
        attributes: {
          'rpc.system.name': 'grpc',
          'rpc.method': 'svc.payment.v1.PaymentSettler/VerifyPayment',
          'rpc.status_code': 'OK',
          'svc.request_id': expect.any(String),
        },
      });
      // The handler ran in the server span: what it calls on continues the same trace.
      expect(seen[0]!.traceparent).toBe(`00-${traceId}-${serverSpan!.spanId}-01`);
      // The service token of the call is nowhere on the span.
      expect(JSON.stringify(serverSpan)).not.toMatch(/bearer|eyJ/i);
    } finally {
      await close();
    }
  });

  it("runs every step of a streamed answer in the call's server span", async () => {
    const seen: TraceHeaders[] = [];
    const handlers = {
      async *runCompletion() {
        seen.push(currentTraceHeaders());
        yield {};
        await sleep(5);
        seen.push(currentTraceHeaders());
        yield {};
      },
    } as unknown as ServiceImpl<(typeof JobOrchestrator)['method']>;
    const server = createServiceGrpcServer(logger).add(
      JobOrchestrator,
      new Proxy(handlers, {
        get: (target, name) => (target as Record<string | symbol, unknown>)[name] ?? (async () => ({})),
      }),
      { open: true },
    );
    const address = `127.0.0.1:${await server.listen('127.0.0.1:0')}`;
    const client = createClient(
      JobOrchestrator,
      address,
      serviceClientOptions({ identity, audience: 'job-orchestrator' }),
    );
    try {
      const { span } = await inSpan('caller', async () => {
        for await (const _answer of client.runCompletion({})) void _answer;
      });
      const [serverSpan] = await exportedChildrenOf(span);
      expect(serverSpan!.name).toBe('svc.orchestrator.v1.JobOrchestrator/RunCompletion');
      expect(seen).toHaveLength(2);
      for (const headers of seen)
        expect(headers.traceparent).toBe(`00-${span.spanContext().traceId}-${serverSpan!.spanId}-01`);
    } finally {
      closeClient(client);
      await server.shutdown(100);
    }
  });

  it('carries traceparent through Kafka headers, both ways', async () => {
    const topic = sampleTopic('trace-headers');
    const { span, result: message } = await inSpan('publisher', async () =>
      toKafkaMessage(
        encodeEvent(topic, sampleEvent({ eventId: 'e-1', key: 'k', seq: 1 }), 'req-1', currentTraceHeaders()),
      ),
    );
    const { traceId, spanId } = span.spanContext();
    expect(message.headers?.traceparent).toBe(`00-${traceId}-${spanId}-01`);

    // As a broker hands it to a consumer: header values as bytes.
    const received = fromKafkaMessage(topic.name, {
      key: Buffer.from('k'),
      value: message.value as Buffer,
      headers: Object.fromEntries(
        Object.entries(message.headers ?? {}).map(([name, value]) => [name, Buffer.from(value as string)]),
      ),
      timestamp: '0',
      attributes: 0,
      offset: '1',
    });
    expect(decodeRecord(topic, received).trace).toEqual({ traceparent: `00-${traceId}-${spanId}-01` });
  });

  it("handles an event in a consumer span that continues the publisher's trace", async () => {
    const bus = new EmbeddedEventBus();
    const topic = sampleTopic('trace-consumer');
    const seen: TraceHeaders[] = [];
    try {
      await bus.subscribe(topic, {
        group: 'tracing',
        handler: async () => void seen.push(currentTraceHeaders()),
      });
      const { span } = await inSpan('publisher', () =>
        bus.publish(topic, sampleEvent({ eventId: 'e-2', key: 'k', seq: 2 })),
      );
      await waitFor(() => seen.length > 0 || undefined, { what: 'the event handled' });
      const [consumerSpan] = await exportedChildrenOf(span);
      expect(consumerSpan).toMatchObject({
        traceId: span.spanContext().traceId,
        name: `process ${topic.name}`,
        kind: 5,
        attributes: {
          'messaging.destination.name': topic.name,
          'messaging.consumer.group.name': 'tracing',
          'messaging.message.id': 'e-2',
        },
      });
      expect(seen[0]!.traceparent).toMatch(TRACEPARENT);
      expect(seen[0]!.traceparent).toBe(`00-${span.spanContext().traceId}-${consumerSpan!.spanId}-01`);
    } finally {
      await bus.close();
    }
  });
});
