// The chart as rendered, read as a kubelet would: each workload's container (its args, environment with
// Secrets resolved, ports, mounts) and each Service (its ports and the workload its selector picks).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ensureHelm } from '../scripts/helm.mjs';

export const repoRoot = join(import.meta.dirname, '..', '..', '..');
export const chartDir = join(repoRoot, 'charts', 'svc');

interface K8sObject {
  kind: string;
  metadata: { name: string; annotations?: Record<string, string> };
  spec?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
}

interface RenderedContainer {
  args?: string[];
  command?: string[];
  env?: Array<{
    name: string;
    value?: string;
    valueFrom?: { secretKeyRef?: { name: string; key: string; optional?: boolean } };
  }>;
  envFrom?: unknown[];
  ports?: Array<{ name?: string; containerPort: number }>;
  volumeMounts?: Array<{ name: string; mountPath: string }>;
  readinessProbe?: { httpGet?: { path: string }; grpc?: { port: number; service?: string } };
}

/** One workload's container as the suite runs it. */
export interface Workload {
  readonly kind: 'Deployment' | 'StatefulSet' | 'Job';
  readonly name: string;
  readonly replicas: number;
  readonly labels: Record<string, string>;
  readonly args: string[];
  readonly env: Record<string, string>;
  /** Container port by its name. */
  readonly ports: Record<string, number>;
  readonly mountPaths: string[];
  readonly readinessHttpPath?: string;
  /** A gRPC readiness probe: the container port it asks and the grpc.health.v1 service it names. */
  readonly readinessGrpc?: { readonly port: number; readonly service: string };
  readonly hook?: string;
}

export interface ServicePort {
  readonly name?: string;
  readonly port: number;
  /** The container port's name or number. */
  readonly targetPort: string | number;
}

export interface Service {
  readonly name: string;
  readonly selector: Record<string, string>;
  readonly ports: ServicePort[];
}

export interface RenderedChart {
  readonly workloads: Workload[];
  readonly services: Service[];
  readonly namespace: string;
}

/** `helm template` of the chart with the given values files; throws with helm's message. */
export function renderChart(
  release: string,
  namespace: string,
  valuesFiles: readonly string[],
): RenderedChart {
  const args = ['template', release, chartDir, '--namespace', namespace];
  for (const file of valuesFiles) args.push('--values', file);
  const result = spawnSync(ensureHelm(), args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (result.status !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  const objects = parseAllDocuments(result.stdout)
    .map((document) => document.toJS() as K8sObject | null)
    .filter((object): object is K8sObject => object !== null);

  const secrets = new Map<string, Record<string, string>>();
  for (const object of objects.filter((o) => o.kind === 'Secret')) {
    const values: Record<string, string> = { ...object.stringData };
    for (const [key, encoded] of Object.entries(object.data ?? {}))
      values[key] = Buffer.from(encoded, 'base64').toString('utf8');
    secrets.set(object.metadata.name, values);
  }

  const workloads: Workload[] = [];
  for (const object of objects) {
    if (object.kind !== 'Deployment' && object.kind !== 'StatefulSet' && object.kind !== 'Job') continue;
    const spec = object.spec as {
      replicas?: number;
      template: { metadata: { labels?: Record<string, string> }; spec: { containers: RenderedContainer[] } };
    };
    const containers = spec.template.spec.containers;
    if (containers.length !== 1) throw new Error(`${object.metadata.name}: expected one container`);
    const container = containers[0]!;
    if (container.envFrom?.length) throw new Error(`${object.metadata.name}: envFrom is not supported here`);
    if (container.command?.length)
      throw new Error(`${object.metadata.name}: the chart overrides the entrypoint`);
    const env: Record<string, string> = {};
    for (const entry of container.env ?? []) {
      if (entry.value !== undefined) env[entry.name] = String(entry.value);
      else if (entry.valueFrom?.secretKeyRef) {
        const ref = entry.valueFrom.secretKeyRef;
        const value = secrets.get(ref.name)?.[ref.key];
        if (value === undefined) {
          if (ref.optional) continue;
          throw new Error(
            `${object.metadata.name}: ${entry.name} names ${ref.name}/${ref.key}, which no rendered Secret holds`,
          );
        }
        env[entry.name] = value;
      } else if (entry.valueFrom)
        throw new Error(`${object.metadata.name}: ${entry.name} has an unsupported source`);
    }
    const ports: Record<string, number> = {};
    for (const port of container.ports ?? []) if (port.name) ports[port.name] = port.containerPort;
    workloads.push({
      kind: object.kind,
      name: object.metadata.name,
      replicas: object.kind === 'Job' ? 1 : (spec.replicas ?? 1),
      labels: spec.template.metadata.labels ?? {},
      args: container.args ?? [],
      env,
      ports,
      mountPaths: (container.volumeMounts ?? []).map((mount) => mount.mountPath),
      readinessHttpPath: container.readinessProbe?.httpGet?.path,
      ...(container.readinessProbe?.grpc
        ? {
            readinessGrpc: {
              port: container.readinessProbe.grpc.port,
              service: container.readinessProbe.grpc.service ?? '',
            },
          }
        : {}),
      hook: object.metadata.annotations?.['helm.sh/hook'],
    });
  }

  const services: Service[] = objects
    .filter((object) => object.kind === 'Service')
    .map((object) => {
      const spec = object.spec as { selector?: Record<string, string>; ports?: ServicePort[] };
      return { name: object.metadata.name, selector: spec.selector ?? {}, ports: spec.ports ?? [] };
    });
  return { workloads, services, namespace };
}

/** The workload a Service's selector picks (exactly one, or the chart is miswired). */
export function workloadOf(chart: RenderedChart, service: Service): Workload {
  const picked = chart.workloads.filter(
    (workload) =>
      workload.kind !== 'Job' &&
      Object.entries(service.selector).every(([label, value]) => workload.labels[label] === value),
  );
  if (picked.length !== 1)
    throw new Error(`Service ${service.name} selects ${picked.length} workloads, expected exactly one`);
  return picked[0]!;
}

/** The image's entry point (the Dockerfile's ENTRYPOINT), with the image's /app mapped to this checkout. */
export function imageEntrypoint(): string[] {
  const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
  const line = dockerfile
    .split('\n')
    .reverse()
    .find((text) => text.startsWith('ENTRYPOINT'));
  if (!line) throw new Error('the Dockerfile has no ENTRYPOINT');
  const entry = JSON.parse(line.slice('ENTRYPOINT'.length).trim()) as string[];
  return entry.map((part) => (part.startsWith('/app/') ? join(repoRoot, part.slice('/app/'.length)) : part));
}
