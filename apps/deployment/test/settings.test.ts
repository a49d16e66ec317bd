// Every environment variable a service reads (its configuration shape and the runner's, imported from
// the code) can be set from values: the chart wires those a cluster cannot leave to their defaults, the
// component's `env` sets any other, secrets come only from Secrets, and the chart sets no variable that
// no service reads.
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import {
  containersByTarget,
  envOf,
  exampleFiles,
  find,
  fixturesDir,
  helmTemplate,
  NAMESPACE,
  render,
  type Container,
  type K8sObject,
  type RenderInput,
} from './support/chart.js';
import { MIGRATE_TARGET } from '@svc/server/migrate';
import { targets } from '@svc/server/targets';
import {
  DEPENDENCY_SETTINGS,
  isSecret,
  migrations,
  readSettings,
  services,
  wiredSettings,
  type Component,
} from './support/components.js';

const allSettings: RenderInput = { valuesFiles: [join(fixturesDir, 'all-settings.yaml')] };
const components = [...services, migrations];

/** `a.b.c` of values as a nested object. */
function at(path: string, value: object): object {
  return path
    .split('.')
    .reverse()
    .reduce<object>((inner, key) => ({ [key]: inner }), value);
}

function containerOf(objects: readonly K8sObject[], component: Component): Container {
  const container = containersByTarget(objects).get(component.target);
  if (!container) throw new Error(`no container runs --target ${component.target}`);
  return container;
}

describe('the settings the chart wires', () => {
  const objects = render(allSettings);

  it.each(components.map((component) => [component.target, component] as const))(
    '%s: every setting without a usable default in a cluster is set, secrets from Secrets',
    (_target, component) => {
      const env = envOf(containerOf(objects, component));
      const missing = [...wiredSettings(component)].filter(([setting]) => !env.has(setting));
      expect(missing).toEqual([]);
      for (const [setting, entry] of env) {
        if (isSecret(component, setting)) {
          expect({ setting, value: entry.value }).toEqual({ setting, value: undefined });
          expect(entry.valueFrom?.secretKeyRef?.name).toBeTruthy();
        }
      }
    },
  );

  it.each(components.map((component) => [component.target, component] as const))(
    '%s: every secret it reads is wired, or belongs to a shared dependency it does not use',
    (_target, component) => {
      const wired = wiredSettings(component);
      const unused = Object.entries(DEPENDENCY_SETTINGS)
        .filter(
          ([dependency]) => !(component.module?.needs as readonly string[] | undefined)?.includes(dependency),
        )
        .flatMap(([, settings]) => settings);
      const unreachable = [...readSettings(component)]
        .filter(([setting, field]) => field.secret && !wired.has(setting))
        .filter(
          ([setting]) =>
            !(component.target === 'migrate' ? setting !== 'DATABASE_URL' : unused.includes(setting)),
        )
        .map(([setting]) => setting);
      expect(unreachable).toEqual([]);
    },
  );

  it("points every peer address at the Service of that peer, on the port of the listener it names (gRPC's by default)", () => {
    for (const component of services) {
      const env = envOf(containerOf(objects, component));
      for (const [setting, peer] of Object.entries(component.module?.peers ?? {})) {
        const { target, listener } = typeof peer === 'string' ? { target: peer, listener: 'grpc' } : peer;
        const address = env.get(setting)?.value ?? '';
        const [host, port] = address.split(':');
        expect(host).toBe(`svc-${target}.${NAMESPACE}.svc`);
        const service = find(objects, 'Service', `svc-${target}`);
        const ports = (service.spec as { ports: Array<{ name: string; port: number }> }).ports;
        expect(ports).toContainEqual(expect.objectContaining({ name: listener, port: Number(port) }));
      }
    }
  });

  it('binds every listener to all interfaces, on the ports its Services and probes use', () => {
    for (const component of services) {
      const container = containerOf(objects, component);
      const env = envOf(container);
      for (const [setting, entry] of env) if (/_HOST$/.test(setting)) expect(entry.value).toBe('0.0.0.0');
      const ports = new Map((container.ports ?? []).map((port) => [port.name, port.containerPort]));
      const portSettings: Record<string, string> = {
        PORT: 'http',
        GRPC_PORT: 'grpc',
        METRICS_PORT: 'metrics',
        HEALTH_PORT: 'metrics',
      };
      for (const [setting, portName] of Object.entries(portSettings)) {
        const value = env.get(setting)?.value;
        if (value !== undefined)
          expect({ setting, port: Number(value) }).toEqual({ setting, port: ports.get(portName) });
      }
    }
  });
});

describe('every other setting', () => {
  it.each(components.map((component) => [component.target, component] as const))(
    "%s: can be set through the component's env",
    (_target, component) => {
      const wired = wiredSettings(component);
      const rest = [...readSettings(component)].filter(
        ([setting]) => !wired.has(setting) && !isSecret(component, setting),
      );
      expect(rest.length).toBeGreaterThan(0);
      const probe = Object.fromEntries(rest.map(([setting]) => [setting, `probe-${setting.toLowerCase()}`]));
      const objects = render({
        valuesFiles: allSettings.valuesFiles,
        values: [at(`${component.valuesKey}.env`, probe)],
      });
      const env = envOf(containerOf(objects, component));
      for (const [setting, value] of Object.entries(probe))
        expect({ setting, value: env.get(setting)?.value }).toEqual({ setting, value });
    },
  );

  it.each(
    services.flatMap((component) =>
      [...readSettings(component)]
        .filter(([setting]) => isSecret(component, setting))
        .map(([setting]) => [component.target, setting, component] as const),
    ),
  )('%s: %s (a secret) is refused as a plain env value', (_target, setting, component) => {
    const result = helmTemplate({
      values: [at(`${component.valuesKey}.env`, { [setting]: 'plain' })],
      valuesFiles: allSettings.valuesFiles,
    });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(`${setting} is a secret`);
  });

  it('a component env value wins over what the chart wires (an escape hatch), and is set once', () => {
    const objects = render({
      valuesFiles: allSettings.valuesFiles,
      values: [{ gateway: { env: { LOG_LEVEL: 'debug' } } }],
    });
    expect(envOf(containerOf(objects, services[0]!)).get('LOG_LEVEL')?.value).toBe('debug');
  });
});

describe('tracing', () => {
  const traced = render(allSettings);
  const untraced = render({
    valuesFiles: allSettings.valuesFiles,
    values: [{ tracing: { otlpEndpoint: '' } }],
  });
  const endpointOf = (objects: readonly K8sObject[], component: Component) =>
    envOf(containerOf(objects, component)).get('OTEL_EXPORTER_OTLP_ENDPOINT')?.value;

  it.each(services.map((component) => [component.target, component] as const))(
    '%s: tracing.otlpEndpoint is its OTEL_EXPORTER_OTLP_ENDPOINT, and unset without it',
    (_target, component) => {
      expect(endpointOf(traced, component)).toBe('http://otel-collector.observability:4318');
      expect(endpointOf(untraced, component)).toBeUndefined();
    },
  );

  it('refuses an endpoint that is not an http(s) URL', () => {
    const result = helmTemplate({ values: [{ tracing: { otlpEndpoint: 'otel-collector:4318' } }] });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('otlpEndpoint');
  });
});

describe('no variable that no service reads', () => {
  const renders: Array<[string, RenderInput]> = [
    ['default values', {}],
    ...exampleFiles.map((file): [string, RenderInput] => [file, { valuesFiles: [file] }]),
    ['all settings', allSettings],
  ];

  it.each(renders)('%s', (_name, input) => {
    const objects = render(input);
    const byTarget = containersByTarget(objects);
    expect(byTarget.size).toBeGreaterThanOrEqual(5);
    for (const [target, container] of byTarget) {
      const component = components.find((candidate) => candidate.target === target);
      if (!component) throw new Error(`the chart runs --target ${target}, which no component here describes`);
      const read = readSettings(component);
      const unknown = [...envOf(container).keys()].filter((setting) => !read.has(setting));
      expect({ target, unknown }).toEqual({ target, unknown: [] });
    }
  });

  it.each(renders)('%s: every value set parses as the service parses it', (_name, input) => {
    const objects = render(input);
    for (const [target, container] of containersByTarget(objects)) {
      const component = components.find((candidate) => candidate.target === target)!;
      const read = readSettings(component);
      for (const [setting, entry] of envOf(container)) {
        if (entry.value === undefined) continue;
        const field = read.get(setting);
        let problem: string | undefined;
        try {
          field?.parse(entry.value);
        } catch (error) {
          problem = (error as Error).message;
        }
        expect({ target, setting, value: entry.value, problem }).toEqual({
          target,
          setting,
          value: entry.value,
          problem: undefined,
        });
      }
    }
  });

  it('covers every target of the runner but all, and its migrate command', () => {
    const objects = render(allSettings);
    const runnerTargets = [...Object.keys(targets).filter((target) => target !== 'all'), MIGRATE_TARGET];
    expect([...containersByTarget(objects).keys()].sort()).toEqual(runnerTargets.sort());
    expect(components.map((component) => component.target).sort()).toEqual(runnerTargets.sort());
  });
});
