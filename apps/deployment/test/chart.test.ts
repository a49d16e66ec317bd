// charts/svc with the real helm: lint --strict and template for the default values and every example,
// every rendered object against the Kubernetes schema, and what the chart promises of its objects.
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { JobOrchestrator } from '@svc/proto/gen/svc/orchestrator/v1/job_orchestrator_pb';
import { KeyService } from '@svc/proto/gen/svc/key/v1/key_service_pb';
import { PaymentSettler } from '@svc/proto/gen/svc/payment/v1/payment_settler_pb';
import { parse } from 'yaml';
import { services } from './support/components.js';
import {
  chartDir,
  containersByTarget,
  envOf,
  exampleFiles,
  find,
  fixturesDir,
  fullName,
  helmLint,
  helmNotes,
  helmTemplate,
  NAMESPACE,
  podTemplate,
  render,
  targetOf,
  workloads,
  type Container,
  type K8sObject,
  validateAgainstSchema,
  type RenderInput,
} from './support/chart.js';

const allSettings = join(fixturesDir, 'all-settings.yaml');
const cases: Array<{ name: string; input: RenderInput }> = [
  { name: 'default values', input: {} },
  ...exampleFiles.map((file) => ({ name: `examples/${basename(file)}`, input: { valuesFiles: [file] } })),
  { name: 'test/fixtures/all-settings.yaml', input: { valuesFiles: [allSettings] } },
];

const GRPC_TARGETS = ['key-service', 'job-orchestrator', 'payment-settler'];
/** grpc.health.v1 names of each gRPC service (the protobuf service each module serves). */
const GRPC_SERVICE_NAMES: Record<string, string> = {
  'key-service': KeyService.typeName,
  'job-orchestrator': JobOrchestrator.typeName,
  'payment-settler': PaymentSettler.typeName,
};

describe.each(cases)('$name', ({ input }) => {
  const objects = render(input);

  it('passes helm lint --strict', () => {
    const result = helmLint(input);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
  });

  it('renders only objects valid against the Kubernetes schema (kubernetes-models)', () => {
    expect(objects.length).toBeGreaterThan(10);
    const { problems, validated } = validateAgainstSchema(helmTemplate(input).stdout);
    expect(problems).toEqual([]);
    expect(validated).toBe(objects.length);
  });

  it('renders no line with trailing whitespace', () => {
    const lines = helmTemplate(input).stdout.split('\n');
    expect(lines.filter((line) => /\s$/.test(line))).toEqual([]);
  });

  it('names every object uniquely, in the release namespace', () => {
    const ids = objects.map((object) => `${object.kind}/${object.metadata.name}`);
    expect(new Set(ids).size).toBe(ids.length);
    for (const object of objects) {
      if (object.kind === 'ServiceMonitor') continue;
      expect(object.metadata.namespace).toBe(NAMESPACE);
    }
  });

  it('deploys gateway, key-service, job-orchestrator and payment-settler from one image, one target each', () => {
    const byTarget = containersByTarget(objects);
    for (const target of ['gateway', ...GRPC_TARGETS]) {
      expect(byTarget.has(target)).toBe(true);
      expect(find(objects, 'Deployment', fullName(target))).toBeDefined();
    }
    const images = new Set([...byTarget.values()].map((container) => container.image));
    expect(images.size).toBe(1);
  });

  it("gives every service's stop less time than its pod's grace period, so it exits before it is killed", () => {
    for (const workload of workloads(objects).filter((workload) => workload.kind !== 'Job')) {
      const { spec } = podTemplate(workload);
      for (const container of spec.containers) {
        const timeout = envOf(container).get('SHUTDOWN_TIMEOUT')?.value ?? '';
        expect({ target: targetOf(container), timeout }).toEqual({
          target: targetOf(container),
          timeout: `${spec.terminationGracePeriodSeconds! - 5}s`,
        });
      }
    }
  });

  it("gives the gateway's streams in flight its grace period less 15 s, 10 s within its stop", () => {
    const gateway = podTemplate(find(objects, 'Deployment', fullName('gateway'))).spec;
    const env = envOf(gateway.containers[0]!);
    const grace = gateway.terminationGracePeriodSeconds!;
    // Answers stream for minutes: a rolled gateway lets them finish (2 min by default).
    expect(grace).toBeGreaterThanOrEqual(120);
    expect(env.get('HTTP_SHUTDOWN_GRACE')?.value).toBe(`${grace - 15}s`);
    expect(env.get('SHUTDOWN_TIMEOUT')?.value).toBe(`${grace - 5}s`);
  });

  it('runs every pod as non-root on a read-only root filesystem with every capability dropped', () => {
    for (const workload of workloads(objects)) {
      const pod = podTemplate(workload).spec;
      expect(pod.securityContext).toMatchObject({
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(pod.automountServiceAccountToken).toBe(false);
      for (const container of pod.containers) {
        expect(container.securityContext).toMatchObject({
          runAsNonRoot: true,
          readOnlyRootFilesystem: true,
          allowPrivilegeEscalation: false,
          privileged: false,
          capabilities: { drop: ['ALL'] },
        });
        // The writable directories are volumes: /tmp and STATE_DIR (and a worker's DATA_DIR).
        const mounts = new Map((container.volumeMounts ?? []).map((mount) => [mount.mountPath, mount.name]));
        expect(mounts.get('/tmp')).toBe('tmp');
        const env = envOf(container);
        for (const setting of ['STATE_DIR', 'DATA_DIR']) {
          const path = env.get(setting)?.value;
          if (path !== undefined) expect(mounts.has(path)).toBe(true);
        }
        const volumes = new Set((pod.volumes ?? []).map((volume) => volume.name));
        const claims = (
          (workload.spec as { volumeClaimTemplates?: K8sObject[] }).volumeClaimTemplates ?? []
        ).map((claim) => claim.metadata.name);
        for (const name of mounts.values()) expect(volumes.has(name) || claims.includes(name)).toBe(true);
      }
    }
  });

  it('probes the gRPC services with native gRPC health probes and the gateway and workers over HTTP', () => {
    for (const [target, container] of containersByTarget(objects)) {
      if (target === 'migrate') {
        expect(container.livenessProbe ?? container.readinessProbe ?? container.startupProbe).toBeUndefined();
        continue;
      }
      const probes = [container.startupProbe, container.livenessProbe, container.readinessProbe];
      for (const probe of probes) expect(probe).toBeDefined();
      if (GRPC_TARGETS.includes(target)) {
        const port = portOf(container, 'grpc');
        expect(Number(envOf(container).get('GRPC_PORT')?.value)).toBe(port);
        for (const probe of probes) expect(probe?.grpc?.port).toBe(port);
        // Readiness asks the server's overall status, which a dead event consumer turns NOT_SERVING;
        // start-up and liveness ask the service's own, so an outage of Kafka restarts nothing.
        expect(container.readinessProbe?.grpc?.service ?? '').toBe('');
        const own = GRPC_SERVICE_NAMES[target];
        expect(container.startupProbe?.grpc?.service).toBe(own);
        expect(container.livenessProbe?.grpc?.service).toBe(own);
      } else {
        const port = target === 'gateway' ? 'http' : 'metrics';
        expect(probes.map((probe) => probe?.httpGet)).toEqual([
          { path: '/healthz', port },
          { path: '/healthz', port },
          { path: '/readyz', port },
        ]);
      }
    }
  });

  it('points every Service, Ingress, HPA and PDB at pods and ports that exist', () => {
    const pods = workloads(objects).map((workload) => podTemplate(workload));
    for (const service of objects.filter((object) => object.kind === 'Service')) {
      const spec = service.spec as { selector: Record<string, string>; ports: Array<{ targetPort: string }> };
      const selected = pods.filter((pod) => matches(spec.selector, pod.metadata.labels));
      expect(selected.length).toBe(1);
      const names = selected[0]!.spec.containers.flatMap((container) =>
        (container.ports ?? []).map((port) => port.name),
      );
      for (const port of spec.ports) expect(names).toContain(port.targetPort);
    }
    for (const ingress of objects.filter((object) => object.kind === 'Ingress')) {
      const rules = (
        ingress.spec as {
          rules: Array<{
            http: { paths: Array<{ backend: { service: { name: string; port: { name: string } } } }> };
          }>;
        }
      ).rules;
      for (const path of rules.flatMap((rule) => rule.http.paths)) {
        expect(path.backend.service.name).toBe(fullName('gateway'));
        const service = find(objects, 'Service', path.backend.service.name);
        expect((service.spec as { ports: Array<{ name: string }> }).ports.map((port) => port.name)).toContain(
          path.backend.service.port.name,
        );
      }
    }
    for (const hpa of objects.filter((object) => object.kind === 'HorizontalPodAutoscaler')) {
      const ref = (hpa.spec as { scaleTargetRef: { kind: string; name: string } }).scaleTargetRef;
      const target = find(objects, ref.kind, ref.name);
      // The autoscaler owns the replica count: the workload sets none that an upgrade would reset.
      expect((target.spec as { replicas?: number }).replicas).toBeUndefined();
    }
    for (const pdb of objects.filter((object) => object.kind === 'PodDisruptionBudget')) {
      const selector = (pdb.spec as { selector: { matchLabels: Record<string, string> } }).selector
        .matchLabels;
      expect(pods.filter((pod) => matches(selector, pod.metadata.labels)).length).toBe(1);
    }
  });

  it('gives each gRPC service a headless Service, so its callers balance calls over every replica', () => {
    for (const target of GRPC_TARGETS.filter((target) => containersByTarget(objects).has(target))) {
      const spec = find(objects, 'Service', fullName(target)).spec as { clusterIP?: string };
      expect({ target, clusterIP: spec.clusterIP }).toEqual({ target, clusterIP: 'None' });
    }
  });

  it('wires the migration Job as a pre-install and pre-upgrade hook, and the key-service not to migrate', () => {
    const job = find(objects, 'Job', fullName('migrations'));
    expect(job.metadata.annotations?.['helm.sh/hook']).toBe('pre-install,pre-upgrade');
    const [container] = podTemplate(job).spec.containers;
    expect(targetOf(container!)).toBe('migrate');
    expect(container!.image).toBe(containersByTarget(objects).get('key-service')!.image);
    expect(envOf(containersByTarget(objects).get('key-service')!).get('RUN_MIGRATIONS')?.value).toBe('false');
  });
});

describe('the Kubernetes schema check', () => {
  it('refuses an invalid object and a kind it has no schema for (it never passes by skipping)', () => {
    const { problems, validated } = validateAgainstSchema(
      [
        'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: broken}\nspec: {replicas: two}',
        'apiVersion: example.com/v1\nkind: Unknown\nmetadata: {name: stranger}',
      ].join('\n---\n'),
    );
    expect(validated).toBe(2);
    expect(problems).toEqual([
      expect.stringMatching(/^apps\/v1\/Deployment broken: .*replicas must be integer/),
      'example.com/v1/Unknown stranger: no Kubernetes schema known for this kind',
    ]);
  });
});

describe('the default values', () => {
  const objects = render();

  it('create no Secret: nothing secret has a value by default', () => {
    expect(objects.filter((object) => object.kind === 'Secret')).toEqual([]);
  });

  it('deploy no workers, no Ingress, no ServiceMonitor, no worker link Service', () => {
    const kinds = objects.map((object) => object.kind);
    expect(kinds).not.toContain('StatefulSet');
    expect(kinds).not.toContain('Ingress');
    expect(kinds).not.toContain('ServiceMonitor');
    expect(objects.some((object) => object.metadata.name === `${fullName('job-orchestrator')}-link`)).toBe(
      false,
    );
  });

  it('say in NOTES.txt what is still to set', () => {
    const notes = helmNotes();
    expect(notes).toContain('WARNING: these settings are not set yet');
    expect(notes).toContain('gateway.trustProxy');
    expect(notes).toContain('secrets.signin.existingSecret');
  });
});

describe('the examples', () => {
  it('production autoscales every service, pins the image by digest and serves TLS with a ServiceMonitor', () => {
    const objects = render({ valuesFiles: [join(chartDir, 'examples', 'production.yaml')] });
    const scaled = objects
      .filter((object) => object.kind === 'HorizontalPodAutoscaler')
      .map((object) => object.metadata.name)
      .sort();
    expect(scaled).toEqual(['gateway', ...GRPC_TARGETS].map(fullName).sort());
    for (const container of containersByTarget(objects).values())
      expect(container.image).toMatch(/@sha256:[0-9a-f]{64}$/);
    const ingress = find(objects, 'Ingress', fullName('gateway'));
    expect((ingress.spec as { tls: unknown[] }).tls).toHaveLength(1);
    // The public routes only: the health routes are for the kubelet, inside the cluster.
    const [rule] = (
      ingress.spec as { rules: Array<{ http: { paths: Array<{ path: string; pathType: string }> } }> }
    ).rules;
    expect(rule!.http.paths.map(({ path, pathType }) => `${pathType} ${path}`)).toEqual([
      'Prefix /v1',
      'Prefix /api',
      'Prefix /assets',
      'Exact /',
      'Exact /index.html',
      'Exact /favicon.ico',
      'Exact /favicon.svg',
    ]);
    expect(objects.filter((object) => object.kind === 'ServiceMonitor')).toHaveLength(1);
    // It scrapes every component whose module exports metrics (the runner's listener), on its metrics port.
    const [monitor] = objects.filter((object) => object.kind === 'ServiceMonitor');
    const selector = (monitor!.spec as { selector: { matchLabels: Record<string, string> } }).selector
      .matchLabels;
    const scraped = objects
      .filter((object) => object.kind === 'Service' && matches(selector, object.metadata.labels ?? {}))
      .map((object) => object.metadata.name);
    const exporting = services.filter((component) => component.module?.needs.includes('metrics'));
    expect(exporting.map((component) => component.target).sort()).toEqual(
      ['gateway', ...GRPC_TARGETS].sort(),
    );
    for (const component of exporting) {
      expect(scraped).toContain(`${fullName(component.target)}-metrics`);
      const container = containersByTarget(objects).get(component.target)!;
      expect(Number(envOf(container).get('METRICS_PORT')?.value)).toBe(portOf(container, 'metrics'));
    }
    expect(objects.filter((object) => object.kind === 'Secret')).toEqual([]);
    const link = find(objects, 'Service', `${fullName('job-orchestrator')}-link`);
    expect((link.spec as { type: string }).type).toBe('LoadBalancer');
    // The link's listener only, never the gRPC port that serves the JobOrchestrator RPCs.
    const linkPorts = (link.spec as { ports: Array<{ targetPort: string }> }).ports;
    expect(linkPorts.map((port) => port.targetPort)).toEqual(['worker-link']);
  });

  it.each(exampleFiles.map((file) => basename(file)))(
    '%s sets every setting a component needs (strictValidation)',
    (file) => {
      const values = parse(readFileSync(join(chartDir, 'examples', file), 'utf8')) as {
        global: { strictValidation: boolean };
      };
      expect(values.global.strictValidation).toBe(true);
      expect(helmNotes({ valuesFiles: [join(chartDir, 'examples', file)] })).not.toContain('WARNING');
    },
  );
});

describe('NetworkPolicies', () => {
  for (const [name, input] of [
    ['default values', {}],
    ['all settings (worker link exposed, workers)', { valuesFiles: [allSettings] }],
  ] as const) {
    it(`leave only the gateway (and an exposed worker link) open beyond the release: ${name}`, () => {
      const objects = render(input);
      const policies = objects.filter((object) => object.kind === 'NetworkPolicy');
      const exposed = new Set<string>();
      for (const workload of workloads(objects)) {
        const labels = podTemplate(workload).metadata.labels;
        const applying = policies.filter((policy) =>
          matches(
            (policy.spec as { podSelector: { matchLabels: Record<string, string> } }).podSelector.matchLabels,
            labels,
          ),
        );
        // Every pod of the release is selected by some policy, so what no rule allows is refused.
        expect(applying.length).toBeGreaterThan(0);
        for (const policy of applying) {
          const spec = policy.spec as {
            policyTypes: string[];
            ingress?: Array<{ from?: object[]; ports?: Array<{ port: number }> }>;
          };
          expect(spec.policyTypes).toContain('Ingress');
          for (const rule of spec.ingress ?? []) {
            const fromAnyone = rule.from === undefined || rule.from.length === 0;
            const fromPods = (rule.from ?? []).every(
              (peer) => 'podSelector' in peer && !('namespaceSelector' in peer),
            );
            if (fromAnyone)
              for (const port of rule.ports ?? [])
                exposed.add(`${labels['app.kubernetes.io/component']}:${port.port}`);
            else if (!fromPods) {
              // Peers outside the release reach only metrics ports.
              for (const port of rule.ports ?? []) expect(port.port).toBe(metricsPort(workload));
            }
          }
        }
      }
      const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as {
        gateway: { service: { containerPort: number } };
        jobOrchestrator: { workerLink: { port: number } };
      };
      const expected = [`gateway:${values.gateway.service.containerPort}`];
      // The worker link's own port: its gRPC port (the JobOrchestrator RPCs) stays inside the release.
      if (input !== undefined && 'valuesFiles' in input)
        expected.push(`job-orchestrator:${values.jobOrchestrator.workerLink.port}`);
      expect([...exposed].sort()).toEqual(expected.sort());
    });
  }
});

describe('values that contradict each other or are incomplete', () => {
  it.each([
    [
      { postgresql: { url: 'postgresql://u:p@db/svc', existingSecret: 'db' } },
      'postgresql.url and postgresql.existingSecret are both set',
    ],
    [
      { secrets: { signer: { existingSecret: 'signer', privateKey: '0xabc' } } },
      'secrets.signer.existingSecret is set together with inline values',
    ],
    [
      {
        worker: { enabled: true, replicaCount: 2 },
        secrets: { worker: { privateKey: '0xabc', keystorePassword: 'x' } },
      },
      'secrets.worker.privateKey names one worker',
    ],
    [
      { gateway: { autoscaling: { enabled: true, minReplicas: 5, maxReplicas: 2 } } },
      'gateway.autoscaling.minReplicas (5) is above maxReplicas (2)',
    ],
    [{ global: { strictValidation: true } }, 'global.strictValidation: these settings are missing'],
    [{ gateway: { typo: 1 } }, "additional properties 'typo' not allowed"],
    [{ gateway: { env: { 'lower-case': 'x' } } }, 'lower-case'],
  ])('refuses %j', (values, message) => {
    const result = helmTemplate({ values: [values] });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(message);
  });

  it('keeps inline development secrets in Secrets of the chart, each mounted only where it is read', () => {
    const objects = render({
      values: [
        {
          postgresql: { url: 'postgresql://svc:pw@db:5432/svc' },
          secrets: {
            signin: { signingKey: '{"kty":"OKP"}', apiKeyPepper: 'p'.repeat(40) },
            signer: { privateKey: '0x01' },
          },
        },
      ],
    });
    const secrets = objects
      .filter((object) => object.kind === 'Secret')
      .map((object) => object.metadata.name)
      .sort();
    // The migration Job's own copy of DATABASE_URL is a hook: it exists before the release's Secrets do.
    expect(secrets).toEqual(
      [fullName('connections'), fullName('migrations'), fullName('signer'), fullName('signin')].sort(),
    );
    const byTarget = containersByTarget(objects);
    expect(envOf(byTarget.get('key-service')!).get('API_KEY_PEPPER')?.valueFrom?.secretKeyRef).toEqual({
      name: fullName('signin'),
      key: 'API_KEY_PEPPER',
    });
    expect(envOf(byTarget.get('key-service')!).has('SIGNIN_TOKEN_VERIFICATION_KEYS')).toBe(false);
    expect(envOf(byTarget.get('migrate')!).get('DATABASE_URL')?.valueFrom?.secretKeyRef?.name).toBe(
      fullName('migrations'),
    );
    for (const [target, container] of byTarget)
      if (target !== 'job-orchestrator')
        expect(envOf(container).has('SERVICE_SIGNER_PRIVATE_KEY')).toBe(false);
  });
});

function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

function portOf(container: Container, name: string): number {
  const port = container.ports?.find((candidate) => candidate.name === name);
  if (!port) throw new Error(`${container.name} has no port ${name}`);
  return port.containerPort;
}

function metricsPort(workload: K8sObject): number | undefined {
  return podTemplate(workload).spec.containers[0]?.ports?.find((port) => port.name === 'metrics')
    ?.containerPort;
}

describe('the worker link with TLS', () => {
  const tlsValues: RenderInput = {
    valuesFiles: [allSettings],
    values: [
      {
        jobOrchestrator: { workerLink: { tls: { secretName: 'worker-link-tls' } } },
        worker: { linkTls: { caSecretName: 'worker-link-ca', caKey: 'ca.pem' } },
      },
    ],
  };

  function mountedSecret(objects: readonly K8sObject[], target: string, setting: string) {
    const workload = workloads(objects).find((object) =>
      podTemplate(object).spec.containers.some((container) => targetOf(container) === target),
    )!;
    const container = containersByTarget(objects).get(target)!;
    const file = envOf(container).get(setting)?.value ?? '';
    const mount = container.volumeMounts?.find((candidate) => file.startsWith(`${candidate.mountPath}/`));
    const volume = (
      podTemplate(workload).spec.volumes as Array<{ name: string; secret?: { secretName: string } }>
    ).find((candidate) => candidate.name === mount?.name);
    return { file, readOnly: mount?.readOnly, secretName: volume?.secret?.secretName };
  }

  it('serves the link with the TLS Secret, and this release’s workers dial it with TLS', () => {
    const objects = render(tlsValues);
    expect(mountedSecret(objects, 'job-orchestrator', 'WORKER_LINK_TLS_CERT_FILE')).toEqual({
      file: '/etc/svc/worker-link-tls/tls.crt',
      readOnly: true,
      secretName: 'worker-link-tls',
    });
    expect(mountedSecret(objects, 'job-orchestrator', 'WORKER_LINK_TLS_KEY_FILE')).toMatchObject({
      file: '/etc/svc/worker-link-tls/tls.key',
      secretName: 'worker-link-tls',
    });
    const worker = envOf(containersByTarget(objects).get('worker')!);
    expect(worker.get('ORCHESTRATOR_LINK')?.value).toBe(
      `tls://${fullName('job-orchestrator')}.${NAMESPACE}.svc:50052`,
    );
    expect(mountedSecret(objects, 'worker', 'ORCHESTRATOR_LINK_CA_FILE')).toEqual({
      file: '/etc/svc/worker-link-ca/ca.pem',
      readOnly: true,
      secretName: 'worker-link-ca',
    });
    expect(validateAgainstSchema(helmTemplate(tlsValues).stdout).problems).toEqual([]);
  });

  it('stays plaintext, with nothing mounted, by default', () => {
    const objects = render({ valuesFiles: [allSettings] });
    const orchestrator = envOf(containersByTarget(objects).get('job-orchestrator')!);
    expect(orchestrator.has('WORKER_LINK_TLS_CERT_FILE')).toBe(false);
    const worker = envOf(containersByTarget(objects).get('worker')!);
    expect(worker.get('ORCHESTRATOR_LINK')?.value).toBe(
      `${fullName('job-orchestrator')}.${NAMESPACE}.svc:50052`,
    );
    expect(worker.has('ORCHESTRATOR_LINK_CA_FILE')).toBe(false);
  });
});
