// The compiled `svc`: apps/cli/dist, one ES module per command (esbuild, code splitting), built from
// src/ and the sources of the workspace packages it imports (their `@svc/source` condition, so no
// package needs a dist of its own). Everything from node_modules stays an import, loaded from there
// by the command that uses it.
//
//   node scripts/build.mjs       (npm run build; npm install runs it as `prepare`, with --at-install)
//
// `bin/svc.js` runs dist/main.js, and calls `build()` itself first when dist is missing or older than a
// file it was built from (dist/build.json lists them).
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const cliDir = fileURLToPath(new URL('..', import.meta.url));
const repoRoot = resolve(cliDir, '../..');
export const distDir = join(cliDir, 'dist');
/** What `bin/svc.js` reads to tell whether dist is current. */
export const BUILD_INFO = 'build.json';
/** Files that shape the build without being among esbuild's inputs. */
const BUILD_FILES = ['package.json', 'scripts/build.mjs'];

/**
 * Builds dist afresh; resolves with the number of milliseconds it took. The new dist is written beside
 * the old one and swapped in by renames, so a concurrent `svc` never reads a half-written one.
 */
export async function build() {
  const started = Date.now();
  const { build: esbuild } = await import('esbuild');
  // Beside dist, under node_modules so that nothing (git, prettier, eslint) sees what a crash leaves.
  const scratch = join(cliDir, 'node_modules', '.cache');
  mkdirSync(scratch, { recursive: true });
  const staging = mkdtempSync(join(scratch, 'svc-dist-'));
  try {
    const result = await esbuild({
      entryPoints: [join(cliDir, 'src/main.ts')],
      outdir: staging,
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      conditions: ['@svc/source'],
      plugins: [externalNodeModules],
      // Chunks sit directly in dist, as deep under the checkout as packages/*/src: the paths the
      // workspace sources compute from import.meta.url (@svc/runtime/state-dir's `.dev`) stay right.
      chunkNames: '[name]-[hash]',
      sourcemap: true,
      metafile: true,
      logLevel: 'warning',
    });
    const inputs = [
      ...BUILD_FILES.map((file) => join(cliDir, file)),
      ...Object.keys(result.metafile.inputs).map((input) => resolve(process.cwd(), input)),
    ].map((file) => relative(cliDir, file));
    writeFileSync(join(staging, BUILD_INFO), `${JSON.stringify({ builtAt: started, inputs }, null, 2)}\n`);
    // Another svc that found dist stale at the same moment built it as well: keep the one in place.
    if (builtAt(distDir) >= started) rmSync(staging, { recursive: true, force: true });
    else swapIn(staging);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw error;
  }
  return Date.now() - started;
}

/** Workspace packages (`@svc/*`) are compiled in; every other bare import stays one. */
const externalNodeModules = {
  name: 'external-node-modules',
  setup(build) {
    build.onResolve({ filter: /^[^./]/ }, (args) =>
      args.path.startsWith('@svc/') ? undefined : { path: args.path, external: true },
    );
  },
};

/** When the build in `dir` started, or 0 when there is none. */
function builtAt(dir) {
  try {
    return JSON.parse(readFileSync(join(dir, BUILD_INFO), 'utf8')).builtAt;
  } catch {
    return 0;
  }
}

function swapIn(staging) {
  const retired = `${staging}-old`;
  try {
    renameSync(distDir, retired);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  try {
    renameSync(staging, distDir);
  } catch (error) {
    // Another svc built it at the same moment: theirs is as new as ours.
    if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    rmSync(staging, { recursive: true, force: true });
  }
  rmSync(retired, { recursive: true, force: true });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const ms = await build();
    console.log(`svc: built ${relative(repoRoot, distDir)} in ${ms} ms`);
  } catch (error) {
    // At install a source that does not compile (a checkout mid-edit) must not fail `npm install`: svc
    // tries again when it runs, and says then what is wrong.
    if (!process.argv.includes('--at-install')) throw error;
    console.warn(
      `svc: ${relative(repoRoot, distDir)} not built (${error.message}); svc builds it when it runs`,
    );
  }
}
