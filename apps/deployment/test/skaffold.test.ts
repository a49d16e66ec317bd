// skaffold.yaml: one artifact (the one image), the chart deployed with that image wired into every
// workload, and a dev profile that renders.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { parse } from 'yaml';
import { chartDir, containersByTarget, find, RELEASE, render, repoRoot } from './support/chart.js';
import { dockerfileStages } from './support/dockerfile.js';

interface SkaffoldConfig {
  apiVersion: string;
  kind: string;
  build: {
    artifacts: Array<{ image: string; context?: string; docker: { dockerfile: string; target?: string } }>;
  };
  deploy: {
    helm: {
      releases: Array<{
        name: string;
        chartPath: string;
        namespace?: string;
        valuesFiles?: string[];
        setValueTemplates?: Record<string, string>;
        setValues?: Record<string, unknown>;
      }>;
    };
  };
  profiles?: Array<{
    name: string;
    activation?: Array<{ command?: string }>;
    patches?: Array<{ op: string; path: string; value: unknown }>;
    portForward?: Array<{ resourceType: string; resourceName: string; namespace?: string; port: number }>;
  }>;
}

const skaffold = parse(readFileSync(join(repoRoot, 'skaffold.yaml'), 'utf8')) as SkaffoldConfig;
const values = parse(readFileSync(join(chartDir, 'values.yaml'), 'utf8')) as {
  global: { image: { repository: string } };
};
const release = skaffold.deploy.helm.releases[0]!;

/** Skaffold's name for an image in templates: every character but letters and digits becomes `_`. */
const templateName = (image: string) => image.replace(/[^A-Za-z0-9]/g, '_');

/** What skaffold would set after a build, its templates filled in as skaffold fills them. */
function filledTemplates(templates: Record<string, string>, image: string, built: Record<string, string>) {
  const name = templateName(image);
  const fields: Record<string, string> = {
    [`IMAGE_REPO_${name}`]: built.repo!,
    [`IMAGE_TAG_${name}`]: built.tag!,
    [`IMAGE_DIGEST_${name}`]: built.digest!,
  };
  return Object.fromEntries(
    Object.entries(templates).map(([key, template]) => [
      key,
      template.replace(/\{\{\s*\.([A-Za-z0-9_]+)\s*\}\}/g, (_match, field: string) => {
        const value = fields[field];
        if (value === undefined)
          throw new Error(`${key} uses {{.${field}}}, which names no artifact of skaffold.yaml`);
        return value;
      }),
    ]),
  );
}

/** Dotted keys (`a.b.c: v`, as skaffold's setValues take them) as nested values. */
function nested(flat: Record<string, unknown>): object {
  const root: Record<string, unknown> = {};
  for (const [path, value] of Object.entries(flat)) {
    const keys = path.split('.');
    let node = root;
    for (const key of keys.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
    node[keys.at(-1)!] = value;
  }
  return root;
}

describe('skaffold.yaml', () => {
  it('is a skaffold v4 config', () => {
    expect(skaffold.apiVersion).toMatch(/^skaffold\/v4/);
    expect(skaffold.kind).toBe('Config');
  });

  it('builds one artifact, the image the chart names, from the root Dockerfile’s runtime stage', () => {
    expect(skaffold.build.artifacts).toHaveLength(1);
    const [artifact] = skaffold.build.artifacts;
    expect(artifact!.image).toBe(values.global.image.repository);
    const dockerfile = join(repoRoot, artifact!.context ?? '.', artifact!.docker.dockerfile);
    expect(existsSync(dockerfile)).toBe(true);
    const stages = dockerfileStages(readFileSync(dockerfile, 'utf8'));
    expect(stages.at(-1)?.name).toBe(artifact!.docker.target);
  });

  it('deploys charts/svc with values files that exist', () => {
    expect(skaffold.deploy.helm.releases).toHaveLength(1);
    // The tests render under the same release name, so the names they check are the ones deployed.
    expect(release.name).toBe(RELEASE);
    expect(join(repoRoot, release.chartPath)).toBe(chartDir.replace(/\/$/, ''));
    for (const file of release.valuesFiles ?? []) expect(existsSync(join(repoRoot, file))).toBe(true);
  });

  it.each([
    ['pushed (tag and digest)', `sha256:${'ab'.repeat(32)}`],
    ['loaded into a local cluster (no digest)', ''],
  ])('wires the built image into every workload of the chart: %s', (_case, digest) => {
    const built = { repo: 'registry.example.com/team/svc-server', tag: 'v1-abc123', digest };
    const set = filledTemplates(release.setValueTemplates ?? {}, skaffold.build.artifacts[0]!.image, built);
    expect(Object.keys(set).sort()).toEqual(['global.image.repository', 'global.image.tag']);
    const objects = render({
      valuesFiles: (release.valuesFiles ?? []).map((file) => join(repoRoot, file)),
      values: [nested(set)],
    });
    const images = [...containersByTarget(objects).values()].map((container) => container.image);
    expect(images.length).toBeGreaterThanOrEqual(5);
    for (const image of images)
      expect(image).toBe(digest ? `${built.repo}:${built.tag}@${digest}` : `${built.repo}:${built.tag}`);
  });

  it('has a dev profile that renders, on one replica each, with the gateway forwarded', () => {
    const dev = skaffold.profiles?.find((profile) => profile.name === 'dev');
    expect(dev).toBeDefined();
    expect(dev!.activation).toContainEqual({ command: 'dev' });
    const setValues = dev!.patches?.find((patch) => patch.path === '/deploy/helm/releases/0/setValues')
      ?.value as Record<string, unknown> | undefined;
    expect(setValues).toBeDefined();
    const objects = render({
      valuesFiles: (release.valuesFiles ?? []).map((file) => join(repoRoot, file)),
      values: [nested(setValues!)],
    });
    expect(objects.filter((object) => object.kind === 'HorizontalPodAutoscaler')).toEqual([]);
    for (const object of objects.filter((candidate) => candidate.kind === 'Deployment'))
      expect((object.spec as { replicas: number }).replicas).toBe(1);
    for (const forward of dev!.portForward ?? []) {
      expect(forward.resourceType).toBe('service');
      const service = find(objects, 'Service', forward.resourceName);
      expect((service.spec as { ports: Array<{ port: number }> }).ports.map((port) => port.port)).toContain(
        forward.port,
      );
    }
  });
});
