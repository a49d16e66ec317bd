import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { EventBus, Logger } from '@svc/platform';
import { GrpcStatus, type EndedCall } from '@svc/proto';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { RuntimeConfig } from '../config.js';

/** The process's Prometheus registry, served on a listener of its own. */
export interface ProcessMetrics {
  readonly registry: Registry;
  /** The port bound (METRICS_PORT 0 picks a free one). */
  readonly port: number;
  close(): Promise<void>;
}

/**
 * One registry per process, with Node's process metrics, served as `GET /metrics` (Prometheus text) on
 * METRICS_HOST:METRICS_PORT, apart from any public port: what operators scrape never goes through the
 * load balancer users reach.
 */
export async function openMetrics(
  runtime: Pick<RuntimeConfig, 'METRICS_HOST' | 'METRICS_PORT'>,
  logger: Logger,
): Promise<ProcessMetrics> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const server = metricsServer(registry, logger);
  server.listen(runtime.METRICS_PORT, runtime.METRICS_HOST);
  await Promise.race([
    once(server, 'listening'),
    once(server, 'error').then(([error]) => Promise.reject(error as Error)),
  ]);
  return {
    registry,
    port: (server.address() as AddressInfo).port,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function metricsServer(registry: Registry, logger: Logger): Server {
  return createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' || path !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    registry.metrics().then(
      (body) => response.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (error: unknown) => {
        logger.error({ err: error }, 'metrics could not be collected');
        response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n');
      },
    );
  });
}

/**
 * Counts the gRPC server's calls as `onCallEnd` reports them, under the names and labels of
 * go-grpc-prometheus, so the usual gRPC dashboards and alerts work unchanged.
 */
export function grpcServerMetrics(registry: Registry): (call: EndedCall) => void {
  // One pair of series per registry, whichever of the process's gRPC servers reports (the worker link
  // listens apart from the process's server).
  let record = callRecorders.get(registry);
  if (!record) callRecorders.set(registry, (record = newGrpcServerMetrics(registry)));
  return record;
}

const callRecorders = new WeakMap<Registry, (call: EndedCall) => void>();

function newGrpcServerMetrics(registry: Registry): (call: EndedCall) => void {
  const labelNames = ['grpc_service', 'grpc_method', 'grpc_type'] as const;
  const handled = new Counter({
    name: 'grpc_server_handled_total',
    help: 'gRPC calls the server completed, by service, method, kind and status code (refused and cancelled calls included).',
    labelNames: [...labelNames, 'grpc_code'],
    registers: [registry],
  });
  const handling = new Histogram({
    name: 'grpc_server_handling_seconds',
    help: 'Time from a call’s arrival to its end; a completion stream lasts as long as its answer.',
    labelNames,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers: [registry],
  });
  return ({ method, code, seconds }) => {
    const labels = {
      grpc_service: method.parent.typeName,
      grpc_method: method.name,
      grpc_type: method.methodKind,
    };
    handled.inc({ ...labels, grpc_code: GrpcStatus[code] ?? String(code) });
    handling.observe(labels, seconds);
  };
}

/** One gauge fed by a shared read (see gaugesOfOneRead): its value in that read, or undefined. */
export interface ReadGauge<T> {
  readonly name: string;
  readonly help: string;
  readonly value: (reading: T) => number | undefined;
}

/**
 * Gauges whose values come from one read at each scrape (a database count, the store's presence): one
 * read however many gauges there are (prom-client collects them concurrently, so they share the read in
 * flight). A failed read (the source is down) or an undefined value resets the gauge, which an
 * unlabelled gauge then reports as 0, rather than a stale value.
 */
export function gaugesOfOneRead<T>(
  registry: Registry,
  read: () => Promise<T>,
  gauges: readonly ReadGauge<T>[],
): void {
  let reading: Promise<T | undefined> | undefined;
  const shared = () =>
    (reading ??= read()
      .catch(() => undefined)
      .finally(() => (reading = undefined)));
  for (const { name, help, value } of gauges)
    new Gauge({
      name,
      help,
      registers: [registry],
      async collect() {
        const result = await shared();
        const current = result === undefined ? undefined : value(result);
        if (current === undefined) this.reset();
        else this.set(current);
      },
    });
}

/**
 * `svc_event_subscription_live{topic,group}`: 1 while a consumer of this process consumes, 0 while it is
 * reconnecting or dead (only dead makes the process unready), read from `bus.health()` at each scrape.
 */
export function eventSubscriptionMetrics(registry: Registry, bus: EventBus): void {
  new Gauge({
    name: 'svc_event_subscription_live',
    help: '1 while the event consumer of this group is consuming the topic, 0 while it is not: reconnecting (a broker outage; the process stays ready) or dead (the process is then not ready).',
    labelNames: ['topic', 'group'],
    registers: [registry],
    collect() {
      // Closed subscriptions drop out of health(): their series go with them.
      this.reset();
      for (const { topic, group, live } of bus.health()) this.set({ topic, group }, live ? 1 : 0);
    },
  });
}
