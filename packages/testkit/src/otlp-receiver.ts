import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

// An OpenTelemetry collector for tests: it takes OTLP/HTTP JSON (what `@opentelemetry/exporter-trace-
// otlp-http` sends) on `/v1/traces` and keeps every span, flattened with the service that exported it.

/** One exported span, as a test reads it. */
export interface ReceivedSpan {
  /** `service.name` of the process that exported it. */
  readonly service: string;
  readonly traceId: string;
  readonly spanId: string;
  /** Empty for a trace's root. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  /** Every attribute, its value as the JSON had it (`stringValue`, `intValue`, … unwrapped). */
  readonly attributes: Readonly<Record<string, unknown>>;
}

export interface OtlpReceiver {
  /** What to set OTEL_EXPORTER_OTLP_ENDPOINT to. */
  readonly endpoint: string;
  /** Every span received so far. */
  spans(): readonly ReceivedSpan[];
  close(): Promise<void>;
}

interface OtlpAttribute {
  key: string;
  value: Record<string, unknown>;
}
interface OtlpExport {
  resourceSpans?: Array<{
    resource?: { attributes?: OtlpAttribute[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        name: string;
        kind: number;
        attributes?: OtlpAttribute[];
      }>;
    }>;
  }>;
}

/** Listens on a free loopback port until closed. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      try {
        received.push(...spansOf(JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtlpExport));
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans: () => [...received],
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function spansOf(body: OtlpExport): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap((resourceSpans) => {
    const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        service,
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: attributesOf(span.attributes),
      })),
    );
  });
}

function attributesOf(attributes: OtlpAttribute[] | undefined): Record<string, unknown> {
  return Object.fromEntries((attributes ?? []).map(({ key, value }) => [key, Object.values(value)[0]]));
}
