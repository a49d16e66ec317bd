// Runs the real helm (extracted by the global setup) on charts/svc and reads what it renders.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments, stringify } from 'yaml';

export const repoRoot = fileURLToPath(new URL('../../../../', import.meta.url));
export const chartDir = join(repoRoot, 'charts', 'svc');
export const examplesDir = join(chartDir, 'examples');
export const fixturesDir = fileURLToPath(new URL('../fixtures/', import.meta.url));
export const RELEASE = 'svc';
export const NAMESPACE = 'svc-test';

/** The helm binary the global setup extracted; it fails the run before any test when it cannot. */
export function helmBinary(): string {
  const binary = process.env.SVC_HELM_BIN;
  if (!binary) throw new Error('SVC_HELM_BIN is unset: the jest global setup (scripts/helm.mjs) did not run');
  return binary;
}

export interface HelmResult {
  readonly status: number;
  readonly stdout: string;
  readonly stderr: string;
}

export function helm(args: readonly string[]): HelmResult {
  const result = spawnSync(helmBinary(), args, { encoding: 'utf8', cwd: repoRoot, maxBuffer: 64 << 20 });
  if (result.error) throw result.error;
  return { status: result.status ?? -1, stdout: result.stdout, stderr: result.stderr };
}

/** Values given to one render: files, and objects written to temporary files (no --set escaping). */
export interface RenderInput {
  readonly valuesFiles?: readonly string[];
  readonly values?: readonly object[];
}

function withValuesArgs<T>(input: RenderInput, run: (args: string[]) => T): T {
  const dir = mkdtempSync(join(tmpdir(), 'svc-chart-values-'));
  try {
    const args: string[] = [];
    for (const file of input.valuesFiles ?? []) args.push('--values', file);
    (input.values ?? []).forEach((values, index) => {
      const file = join(dir, `values-${index}.yaml`);
      writeFileSync(file, stringify(values));
      args.push('--values', file);
    });
    return run(args);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `helm template` of the chart; the result as helm gave it (a failed render is not thrown). */
export function helmTemplate(input: RenderInput = {}, extra: readonly string[] = []): HelmResult {
  return withValuesArgs(input, (args) =>
    helm(['template', RELEASE, chartDir, '--namespace', NAMESPACE, ...args, ...extra]),
  );
}

export function helmLint(input: RenderInput = {}): HelmResult {
  return withValuesArgs(input, (args) =>
    helm(['lint', '--strict', chartDir, '--namespace', NAMESPACE, ...args]),
  );
}

/** A Kubernetes object as rendered (plain JSON). */
export interface K8sObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly labels?: Record<string, string>;
    readonly annotations?: Record<string, string>;
  };
  readonly [field: string]: unknown;
}

/** Renders and parses; throws with helm's message when the render fails. */
export function render(input: RenderInput = {}, extra: readonly string[] = []): K8sObject[] {
  const result = helmTemplate(input, extra);
  if (result.status !== 0) throw new Error(`helm template failed:\n${result.stderr}`);
  return parseManifests(result.stdout);
}

export function parseManifests(text: string): K8sObject[] {
  const objects: K8sObject[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0) throw new Error(`unparsable manifest: ${document.errors[0]?.message}`);
    const value = document.toJS() as K8sObject | null;
    if (value !== null) objects.push(value);
  }
  return objects;
}

// --- Workloads, containers, env -------------------------------------------------------------------

export interface EnvVar {
  readonly name: string;
  readonly value?: string;
  readonly valueFrom?: {
    readonly secretKeyRef?: { readonly name: string; readonly key: string; readonly optional?: boolean };
    readonly [source: string]: unknown;
  };
}

export interface Container {
  readonly name: string;
  readonly image: string;
  readonly args?: string[];
  readonly env?: EnvVar[];
  readonly ports?: Array<{ name?: string; containerPort: number }>;
  readonly securityContext?: Record<string, unknown>;
  readonly volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
  readonly startupProbe?: Probe;
  readonly livenessProbe?: Probe;
  readonly readinessProbe?: Probe;
}

export interface Probe {
  readonly grpc?: { port: number; service?: string };
  readonly httpGet?: { path: string; port: number | string };
}

export interface PodSpec {
  readonly containers: Container[];
  readonly securityContext?: Record<string, unknown>;
  readonly volumes?: Array<{ name: string; emptyDir?: object; persistentVolumeClaim?: object }>;
  readonly serviceAccountName?: string;
  readonly automountServiceAccountToken?: boolean;
  readonly terminationGracePeriodSeconds?: number;
}

export interface PodTemplate {
  readonly metadata: { labels: Record<string, string>; annotations?: Record<string, string> };
  readonly spec: PodSpec;
}

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'Job']);

export function workloads(objects: readonly K8sObject[]): K8sObject[] {
  return objects.filter((object) => WORKLOAD_KINDS.has(object.kind));
}

export function podTemplate(workload: K8sObject): PodTemplate {
  return (workload.spec as { template: PodTemplate }).template;
}

/** The target a workload's container runs (`--target <name>`). */
export function targetOf(container: Container): string {
  const args = container.args ?? [];
  const index = args.indexOf('--target');
  if (index < 0 || args[index + 1] === undefined) throw new Error(`${container.name} has no --target`);
  return args[index + 1] as string;
}

/** Every container of the render by the target it runs. */
export function containersByTarget(objects: readonly K8sObject[]): Map<string, Container> {
  const byTarget = new Map<string, Container>();
  for (const workload of workloads(objects)) {
    for (const container of podTemplate(workload).spec.containers) {
      const target = targetOf(container);
      if (byTarget.has(target)) throw new Error(`two containers run --target ${target}`);
      byTarget.set(target, container);
    }
  }
  return byTarget;
}

export function envOf(container: Container): Map<string, EnvVar> {
  const env = new Map<string, EnvVar>();
  for (const entry of container.env ?? []) {
    if (env.has(entry.name)) throw new Error(`${container.name} sets ${entry.name} twice`);
    env.set(entry.name, entry);
  }
  return env;
}

export function find(objects: readonly K8sObject[], kind: string, name: string): K8sObject {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in the render`);
  return found;
}

export const fullName = (component: string): string => `${RELEASE}-${component}`;

export const exampleFiles = ['minimal.yaml', 'production.yaml'].map((file) => join(examplesDir, file));

/** NOTES.txt as `helm install --dry-run=client` renders it (no cluster needed). */
export function helmNotes(input: RenderInput = {}): string {
  const result = withValuesArgs(input, (args) =>
    helm(['install', RELEASE, chartDir, '--namespace', NAMESPACE, '--dry-run=client', ...args]),
  );
  if (result.status !== 0) throw new Error(`helm install --dry-run=client failed:\n${result.stderr}`);
  const start = result.stdout.indexOf('NOTES:');
  if (start < 0) throw new Error('helm install --dry-run=client printed no NOTES');
  return result.stdout.slice(start);
}

/**
 * Validates a rendered manifest stream against the Kubernetes schema (scripts/validate-manifests.mjs,
 * kubernetes-models, in a plain node process: its modules load under the `import` condition only).
 */
export function validateAgainstSchema(manifests: string): { problems: string[]; validated: number } {
  const script = fileURLToPath(new URL('../../scripts/validate-manifests.mjs', import.meta.url));
  const result = spawnSync(process.execPath, [script], { input: manifests, encoding: 'utf8', cwd: repoRoot });
  if (result.error) throw result.error;
  const counted = /(\d+) objects validated, (\d+) problems/.exec(result.stderr);
  if (!counted) throw new Error(`validate-manifests.mjs failed:\n${result.stdout}${result.stderr}`);
  const problems = result.stdout.split('\n').filter(Boolean);
  if ((result.status === 0) !== (problems.length === 0))
    throw new Error(`inconsistent result: ${result.stderr}`);
  return { problems, validated: Number(counted[1]) };
}
