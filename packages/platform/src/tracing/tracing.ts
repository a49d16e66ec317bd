import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from '@opentelemetry/sdk-trace';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { env, type ConfigOf } from '../config/index.js';

/** The samplers `OTEL_TRACES_SAMPLER` names, as the OpenTelemetry specification spells them. */
export const TRACE_SAMPLERS = [
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
  'always_on',
  'always_off',
  'traceidratio',
] as const;
export type TraceSamplerName = (typeof TRACE_SAMPLERS)[number];

/** The standard OpenTelemetry settings this process honours (the runner reads them with its own). */
export const tracingConfigShape = {
  OTEL_EXPORTER_OTLP_ENDPOINT: env.url({
    doc: 'OpenTelemetry collector to export trace spans to, over OTLP/HTTP (JSON) at its `/v1/traces` (`http://otel-collector:4318`, say). Unset: no span is recorded or exported. The exporter also honours the standard `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_TIMEOUT`.',
    protocols: ['http', 'https'],
  }),
  OTEL_SERVICE_NAME: env.optionalString({
    doc: "The `service.name` of this process's spans. Default: the target it runs (`gateway`, `key-service`, …, `all`).",
  }),
  OTEL_TRACES_SAMPLER: env.oneOf({
    doc: 'Which traces are recorded, as OpenTelemetry names its samplers: `parentbased_*` follows the caller’s decision (its `traceparent`) and applies the rest to traces that start here.',
    values: TRACE_SAMPLERS,
    default: 'parentbased_always_on',
  }),
  OTEL_TRACES_SAMPLER_ARG: env.ratio({
    doc: 'The share of traces the `traceidratio` samplers record, from 0 to 1.',
    default: 1,
  }),
};

export type TracingConfig = ConfigOf<typeof tracingConfigShape>;

export interface TracingSettings {
  /** OTLP/HTTP endpoint; spans go to its `/v1/traces`. Unset: tracing is off. */
  readonly endpoint: string | undefined;
  /** The `service.name` of every span this process exports. */
  readonly serviceName: string;
  readonly sampler: TraceSamplerName;
  /** The ratio of the `traceidratio` samplers, from 0 to 1. */
  readonly samplerRatio: number;
}

/** The tracing settings of a process running `target`, from its configuration. */
export function tracingSettings(config: TracingConfig, target: string): TracingSettings {
  return {
    endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT,
    serviceName: config.OTEL_SERVICE_NAME ?? target,
    sampler: config.OTEL_TRACES_SAMPLER,
    samplerRatio: config.OTEL_TRACES_SAMPLER_ARG,
  };
}

export interface Tracing {
  readonly enabled: boolean;
  /** Exports the spans ended so far now, not at the next batch. */
  flush(): Promise<void>;
  /** Exports the spans still buffered, then stops tracing in this process. */
  shutdown(): Promise<void>;
}

const TRACING_OFF: Tracing = {
  enabled: false,
  flush: async () => undefined,
  shutdown: async () => undefined,
};

let provider: TracerProvider | undefined;

/** Whether this process records spans: every instrumentation point asks first, so off costs nothing. */
export function isTracing(): boolean {
  return provider !== undefined;
}

/**
 * Starts exporting spans over OTLP/HTTP (JSON) when an endpoint is set; without one, nothing is
 * registered and every span is a no-op. Propagation is W3C trace context (`traceparent`, `tracestate`).
 * A second start in one process (two targets in one test) shares the first one's exporter.
 */
export function startTracing(settings: TracingSettings): Tracing {
  if (!settings.endpoint) return TRACING_OFF;
  if (provider) {
    const shared = provider;
    return { enabled: true, flush: () => shared.forceFlush(), shutdown: () => shared.forceFlush() };
  }
  const started = new TracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: settings.serviceName })),
    sampler: samplerOf(settings),
    spanProcessors: [
      new BatchSpanProcessor({ exporter: new OTLPTraceExporter({ url: tracesUrl(settings.endpoint) }) }),
    ],
  });
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(started);
  provider = started;
  return {
    enabled: true,
    flush: () => started.forceFlush(),
    shutdown: async () => {
      try {
        await started.shutdown();
      } finally {
        trace.disable();
        propagation.disable();
        context.disable();
        provider = undefined;
      }
    },
  };
}

/** Where OTLP/HTTP takes traces: the endpoint's `/v1/traces`, as the specification derives it. */
export function tracesUrl(endpoint: string): string {
  return `${endpoint.replace(/\/+$/, '')}/v1/traces`;
}

function samplerOf({ sampler, samplerRatio }: TracingSettings): Sampler {
  switch (sampler) {
    case 'always_on':
      return new AlwaysOnSampler();
    case 'always_off':
      return new AlwaysOffSampler();
    case 'traceidratio':
      return new TraceIdRatioBasedSampler(samplerRatio);
    case 'parentbased_always_on':
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case 'parentbased_always_off':
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case 'parentbased_traceidratio':
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(samplerRatio) });
  }
}
