import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';

// The compiled `svc`, run by its path from outside the checkout as the README's alias runs it: what it
// loads for each command, and that it rebuilds dist itself when a source is newer.

const cliDir = fileURLToPath(new URL('..', import.meta.url));
const svcBin = join(cliDir, '../../node_modules/.bin/svc');
const HEAVY = ['ethers', 'openai', 'ora', 'siwe', '@inquirer/prompts', 'zod', '@bufbuild/protobuf'];

let scratch: string;
let hooks: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'svc-compiled-'));
  // A module hook that appends every resolved module to the file named by SVC_TEST_LOADED.
  const hookModule = join(scratch, 'hooks.mjs');
  writeFileSync(
    hookModule,
    `import { appendFileSync } from 'node:fs';
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  appendFileSync(process.env.SVC_TEST_LOADED, resolved.url + '\\n');
  return resolved;
}`,
  );
  hooks = join(scratch, 'register.mjs');
  writeFileSync(
    hooks,
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hookModule).href)});\n`,
  );
  // dist current first: a source edited since the last build would make the first run below build it,
  // loading esbuild, which is not what a command loads.
  svc(['--help']);
});

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Runs svc with `args`; its exit code, output, and the node_modules packages it loaded. */
function svc(args: string[], env: NodeJS.ProcessEnv = {}) {
  const loaded = join(scratch, `loaded-${Math.random().toString(36).slice(2)}.txt`);
  writeFileSync(loaded, '');
  const run = spawnSync(process.execPath, ['--import', pathToFileURL(hooks).href, svcBin, ...args], {
    cwd: scratch,
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH,
      HOME: scratch,
      SVC_CONFIG_DIR: join(scratch, 'config'),
      STATE_DIR: join(scratch, 'state'),
      SVC_TEST_LOADED: loaded,
      ...env,
    },
  });
  const urls = readFileSync(loaded, 'utf8').split('\n').filter(Boolean);
  const packages = new Set(
    urls.flatMap((url) => {
      const match = /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url);
      return match ? [match[1]!] : [];
    }),
  );
  return { code: run.status, stdout: run.stdout, stderr: run.stderr, urls, packages };
}

describe('the compiled svc', () => {
  it('answers --help from dist/, loading commander and nothing heavy', () => {
    const help = svc(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^Usage: svc /);
    expect(help.urls.some((url) => url.endsWith('/apps/cli/dist/main.js'))).toBe(true);
    expect(help.urls.filter((url) => url.endsWith('.ts'))).toEqual([]);
    expect([...help.packages]).toEqual(['commander']);
  });

  it('loads what a command needs only when it runs: keys loads ethers, not openai or siwe', () => {
    // Not signed in: the command's module runs, and stops before any HTTP.
    const keys = svc(['keys', 'list', '--json', '--base-url', 'http://127.0.0.1:9']);
    expect(keys.code).toBe(3);
    expect(JSON.parse(keys.stdout)).toEqual({ error: expect.objectContaining({ code: 'unauthorized' }) });
    expect(keys.urls.some((url) => /\/apps\/cli\/dist\/keys-[^/]+\.js$/.test(url))).toBe(true);
    expect(keys.packages.has('ethers')).toBe(true);
    for (const name of ['openai', 'siwe', '@inquirer/prompts', 'ora'])
      expect(keys.packages.has(name)).toBe(false);
    const help = svc(['keys', '--help']);
    expect(help.code).toBe(0);
    for (const name of HEAVY) expect(help.packages.has(name)).toBe(false);
  });

  it('loads usage in its own module, with ethers and nothing else heavy; its usage errors send nothing', () => {
    const usage = svc(['usage', '--json', '--since', '7d', '--base-url', 'http://127.0.0.1:9']);
    expect(usage.code).toBe(3);
    expect(JSON.parse(usage.stdout)).toEqual({ error: expect.objectContaining({ code: 'unauthorized' }) });
    expect(usage.urls.some((url) => /\/apps\/cli\/dist\/usage-[^/]+\.js$/.test(url))).toBe(true);
    expect(usage.packages.has('ethers')).toBe(true);
    for (const name of ['openai', 'siwe', '@inquirer/prompts', 'ora', 'zod', '@bufbuild/protobuf'])
      expect(usage.packages.has(name)).toBe(false);
    const refused = svc(['usage', '--since', 'yesterday', '--base-url', 'http://127.0.0.1:9']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/^svc: --since "yesterday" is not a time: /);
    const help = svc(['usage', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('--since <time>');
    for (const name of HEAVY) expect(help.packages.has(name)).toBe(false);
  });

  it('rebuilds dist first when a file it was built from is newer', () => {
    const info = join(cliDir, 'dist/build.json');
    svc(['--help']); // current now
    const before = JSON.parse(readFileSync(info, 'utf8')) as { builtAt: number; inputs: string[] };
    expect(before.inputs).toEqual(
      expect.arrayContaining(['src/main.ts', 'src/commands/keys.ts', '../../packages/api/src/index.ts']),
    );
    // The build's own script stands for any of them; its content is left as it is.
    const script = join(cliDir, 'scripts/build.mjs');
    const edited = new Date(Math.min(Date.now(), before.builtAt + 10));
    utimesSync(script, edited, edited);
    const help = svc(['--help']);
    expect(help.code).toBe(0);
    const after = JSON.parse(readFileSync(info, 'utf8')) as { builtAt: number };
    expect(after.builtAt).toBeGreaterThan(before.builtAt);
    expect(help.packages.has('esbuild')).toBe(true);
  });
});
