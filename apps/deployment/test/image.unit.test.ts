// The root Dockerfile and what it relies on: a build stage that installs from the lockfile and compiles
// every package, a runtime stage that runs the compiled runner as a non-root user, and every workspace
// package the runner loads able to run from dist/ (no tsx, no `@svc/source` condition). No docker engine
// is needed: the Dockerfile is read, and the packages' manifests are checked.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { targets } from '@svc/server/targets';
import { repoRoot } from './support/chart.js';
import { dockerfileStages, execForm } from './support/dockerfile.js';

const stages = dockerfileStages(readFileSync(join(repoRoot, 'Dockerfile'), 'utf8'));
const build = stages.find((stage) => stage.name === 'build');
const runtime = stages.at(-1)!;
const runs = (stage: typeof runtime) =>
  stage.instructions
    .filter((instruction) => instruction.keyword === 'RUN')
    .map((instruction) => instruction.args);

interface PackageJson {
  name: string;
  scripts?: Record<string, string>;
  dependencies?: Record<string, string>;
  exports?: Record<string, unknown>;
  bin?: Record<string, string>;
}

const workspaces = new Map<string, { dir: string; manifest: PackageJson }>();
for (const group of ['apps', 'packages', 'services']) {
  for (const entry of readdirSync(join(repoRoot, group))) {
    const file = join(repoRoot, group, entry, 'package.json');
    if (!existsSync(file)) continue;
    const manifest = JSON.parse(readFileSync(file, 'utf8')) as PackageJson;
    workspaces.set(manifest.name, { dir: `${group}/${entry}`, manifest });
  }
}

/** The workspace packages the runner loads in production: @svc/server and its dependencies, transitively. */
function runtimeWorkspaces(): string[] {
  const seen = new Set<string>();
  const visit = (name: string) => {
    if (seen.has(name) || !workspaces.has(name)) return;
    seen.add(name);
    for (const dependency of Object.keys(workspaces.get(name)!.manifest.dependencies ?? {}))
      visit(dependency);
  };
  visit('@svc/server');
  return [...seen].sort();
}

describe('the Dockerfile', () => {
  it('has a build stage and a runtime stage, the runtime last', () => {
    expect(build).toBeDefined();
    expect(runtime.name).toBe('runtime');
    expect(runtime.base).not.toBe(build!.base);
  });

  it('installs from the lockfile the repository’s way and compiles every package', () => {
    const commands = runs(build!).join(' && ');
    expect(commands).toMatch(/npm install --no-audit --no-fund(?! -)/);
    expect(commands).not.toMatch(/npm ci\b/);
    expect(commands).toContain('npm run build');
    expect(commands).toContain('npm prune --omit=dev');
  });

  it('runs the compiled runner, as a non-root user, with a target', () => {
    const user = runtime.instructions.filter((instruction) => instruction.keyword === 'USER').at(-1)?.args;
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user);
    const entrypoint = execForm(runtime, 'ENTRYPOINT');
    expect(entrypoint).toEqual(['node', '/app/apps/server/dist/main.js']);
    const command = execForm(runtime, 'CMD')!;
    expect(command[0]).toBe('--target');
    expect(Object.keys(targets)).toContain(command[1]);
    const text = runtime.instructions.map((instruction) => instruction.args).join('\n');
    expect(text).not.toMatch(/tsx|@svc\/source|\.ts\b/);
  });

  it('copies no sources into the runtime stage, only the build’s runtime tree', () => {
    const copies = runtime.instructions.filter((instruction) => instruction.keyword === 'COPY');
    expect(copies.length).toBeGreaterThan(0);
    for (const copy of copies) expect(copy.args).toMatch(/^--from=build /);
  });

  it('keeps its state in a volume, so the root filesystem can be read-only', () => {
    const env = runtime.instructions
      .filter((instruction) => instruction.keyword === 'ENV')
      .map((i) => i.args)
      .join(' ');
    expect(env).toMatch(/STATE_DIR=(\S+)/);
    const stateDir = /STATE_DIR=(\S+)/.exec(env)![1]!;
    const volumes = runtime.instructions
      .filter((instruction) => instruction.keyword === 'VOLUME')
      .map((i) => i.args)
      .join(' ');
    expect(volumes).toContain(stateDir);
  });

  it('has a .dockerignore that leaves out installs, builds and the git history', () => {
    const ignored = readFileSync(join(repoRoot, '.dockerignore'), 'utf8').split('\n');
    for (const pattern of ['**/node_modules', '**/dist', '.git', '.dev']) expect(ignored).toContain(pattern);
  });
});

describe('running from dist/', () => {
  const names = runtimeWorkspaces();

  it('follows the runner’s workspace dependencies', () => {
    expect(names).toEqual(
      expect.arrayContaining([
        '@svc/server',
        '@svc/runtime',
        '@svc/gateway',
        '@svc/key-service',
        '@svc/worker',
      ]),
    );
  });

  it.each(names)(
    '%s is compiled by `npm run build` and resolves to dist/ without the @svc/source condition',
    (name) => {
      const { dir, manifest } = workspaces.get(name)!;
      if (name === '@svc/console') {
        // The web console is a Vite build (its `generate`), served from dist/ as files.
        expect(manifest.scripts?.generate).toMatch(/vite build/);
        return;
      }
      expect(manifest.scripts?.build).toMatch(/^tsc -p tsconfig\.build\.json$/);
      const tsconfig = JSON.parse(readFileSync(join(repoRoot, dir, 'tsconfig.build.json'), 'utf8')) as {
        extends: string;
        compilerOptions: { outDir: string };
      };
      expect(tsconfig.extends).toBe('../../tsconfig.build.base.json');
      expect(tsconfig.compilerOptions.outDir).toBe('dist');
      for (const [subpath, conditions] of Object.entries(manifest.exports ?? {})) {
        if (typeof conditions === 'string') continue;
        const { default: target } = conditions as Record<string, string>;
        expect({ subpath, target }).toEqual({ subpath, target: expect.stringMatching(/^\.\/dist\/.*\.js$/) });
      }
    },
  );

  it('builds apps/server’s entry point, the image’s ENTRYPOINT', () => {
    const tsconfig = JSON.parse(readFileSync(join(repoRoot, 'apps/server/tsconfig.build.json'), 'utf8')) as {
      include: string[];
      compilerOptions: { rootDir: string };
    };
    expect(tsconfig.include).toContain('src');
    expect(tsconfig.compilerOptions.rootDir).toBe('src');
  });
});
