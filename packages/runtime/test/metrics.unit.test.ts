import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createLogger, EmbeddedEventBus, jobLifecycleTopic, MemoryStore, env } from '@svc/platform';
import { closeClient, createClient, GrpcStatus, RpcError, type ServiceImpl } from '@svc/proto';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { sampleValue, scrape } from '@svc/testkit';
import { Counter, Registry } from 'prom-client';
import { defineModule, gaugesOfOneRead, runTarget, type RunningTarget } from '../src/index.js';

// The runner's one way to export metrics: a listener of its own per process, one registry that every
// module registers on, Node's process metrics, the gRPC server's calls and the event consumers' health.

const logger = createLogger({ service: 'metrics-test', level: 'silent' });

/** A module counting what it does on the process's registry, as the services do. */
function countingModule(name: string) {
  return defineModule({
    name,
    configShape: { GREETING: env.string({ doc: 'unused', default: 'hi' }) },
    needs: ['metrics'],
    build: (_config, { metrics }) => {
      new Counter({ name: `svc_${name}_started_total`, help: 'starts', registers: [metrics] }).inc();
      return { start: async () => {}, stop: async () => {} };
    },
  });
}

/** Serves JobOrchestrator to anyone: DescribeChain answers, ListModels fails with NOT_FOUND. */
const serving = defineModule({
  name: 'serving',
  configShape: {},
  needs: ['grpc', 'bus', 'metrics'],
  build: (_config, { grpc, bus }) => ({
    start: async () => {
      const handlers: Record<string, () => Promise<unknown>> = {
        describeChain: async () => ({ chainId: 1n }),
        listModels: async () => {
          throw new RpcError(GrpcStatus.NOT_FOUND, 'no models');
        },
      };
      const implementation = new Proxy(handlers, {
        get: (target, method: string) => target[method] ?? (async () => ({})),
      }) as unknown as ServiceImpl<(typeof JobOrchestrator)['method']>;
      grpc.add(JobOrchestrator, implementation, { open: true });
      await bus.subscribe(jobLifecycleTopic, { group: 'metrics-test', handler: async () => {} });
    },
    stop: async () => {},
  }),
});

describe('the metrics listener', () => {
  const store = new MemoryStore();
  const bus = new EmbeddedEventBus();
  let running: RunningTarget;

  beforeAll(async () => {
    running = await runTarget(
      { name: 'together', modules: [countingModule('first'), countingModule('second'), serving] },
      { env: { GRPC_PORT: '0', METRICS_PORT: '0' }, provided: { store, bus }, logger },
    );
  });

  afterAll(async () => {
    await running?.stop();
    await bus.close();
    await store.close();
  });

  it("serves every module's metrics and the process's on one listener", async () => {
    const text = await scrape(running.metricsUrl!);
    expect(sampleValue(text, 'svc_first_started_total')).toBe(1);
    expect(sampleValue(text, 'svc_second_started_total')).toBe(1);
    expect(sampleValue(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    expect(text.match(/^# TYPE process_cpu_seconds_total /gm)).toHaveLength(1);
    expect(new URL(running.metricsUrl!).port).not.toBe(running.grpcAddress!.split(':').at(-1));
  });

  it('answers only GET /metrics', async () => {
    expect((await fetch(new URL('/other', running.metricsUrl!))).status).toBe(404);
    expect((await fetch(running.metricsUrl!, { method: 'POST' })).status).toBe(404);
  });

  it("counts the gRPC server's calls by service, method and status code, and times them", async () => {
    const client = createClient(JobOrchestrator, running.grpcAddress!);
    try {
      await client.describeChain({});
      await client.describeChain({});
      await expect(client.listModels({})).rejects.toThrow(RpcError);
    } finally {
      closeClient(client);
    }
    const text = await scrape(running.metricsUrl!);
    const service = { grpc_service: 'svc.orchestrator.v1.JobOrchestrator', grpc_type: 'unary' };
    const describeChain = { ...service, grpc_method: 'DescribeChain' };
    const list = { ...service, grpc_method: 'ListModels' };
    expect(sampleValue(text, 'grpc_server_handled_total', { ...describeChain, grpc_code: 'OK' })).toBe(2);
    expect(sampleValue(text, 'grpc_server_handled_total', { ...list, grpc_code: 'NOT_FOUND' })).toBe(1);
    expect(sampleValue(text, 'grpc_server_handled_total', { ...list, grpc_code: 'OK' })).toBeUndefined();
    expect(sampleValue(text, 'grpc_server_handling_seconds_count', describeChain)).toBe(2);
  });

  it("shows each event consumer's health", async () => {
    const text = await scrape(running.metricsUrl!);
    expect(
      sampleValue(text, 'svc_event_subscription_live', {
        topic: jobLifecycleTopic.name,
        group: 'metrics-test',
      }),
    ).toBe(1);
  });
});

describe('the metrics listener of a process', () => {
  it('is not opened when no module exports metrics', async () => {
    const quiet = defineModule({
      name: 'quiet',
      configShape: {},
      needs: [],
      build: () => ({ start: async () => {}, stop: async () => {} }),
    });
    const running = await runTarget({ name: 'quiet', modules: [quiet] }, { env: {}, logger });
    expect(running.metricsUrl).toBeUndefined();
    await running.stop();
  });

  it('fails the start when its port is taken', async () => {
    const holder = await runTarget(
      { name: 'holder', modules: [countingModule('holder')] },
      { env: { METRICS_PORT: '0' }, logger },
    );
    try {
      const port = new URL(holder.metricsUrl!).port;
      await expect(
        runTarget(
          { name: 'second', modules: [countingModule('late')] },
          { env: { METRICS_PORT: port }, logger },
        ),
      ).rejects.toThrow(/EADDRINUSE/);
    } finally {
      await holder.stop();
    }
  });
});

describe('gaugesOfOneRead', () => {
  it('reads once per scrape for all its gauges, and resets them while the read fails', async () => {
    const registry = new Registry();
    let reads = 0;
    let failing = false;
    gaugesOfOneRead(registry, async () => {
      reads += 1;
      if (failing) throw new Error('store down');
      return { count: 3, age: 7 };
    }, [
      { name: 'test_count', help: 'count', value: (read) => read.count },
      { name: 'test_age', help: 'age', value: (read) => read.age },
    ]);
    const first = await registry.metrics();
    expect(reads).toBe(1);
    expect([sampleValue(first, 'test_count'), sampleValue(first, 'test_age')]).toEqual([3, 7]);

    failing = true;
    const down = await registry.metrics();
    expect(reads).toBe(2);
    expect([sampleValue(down, 'test_count'), sampleValue(down, 'test_age')]).toEqual([0, 0]);
  });
});
