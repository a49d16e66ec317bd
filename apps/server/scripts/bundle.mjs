// The compiled `npm start`: apps/server/dist/start, two ES modules built by esbuild from the TypeScript
// sources (`@svc/source` condition: every workspace package is compiled in, no package needs a dist):
// `main.js` (the server, every service, the devnet and the workers) and `launcher/launch.js` (what
// `npm start` runs, which spawns main.js). Running JavaScript instead of compiling TypeScript at run
// time (tsx) takes seconds and hundreds of megabytes off every start.
//
//   node scripts/bundle.mjs          (npm run bundle; npm install runs it as `prepare`, with --at-install)
//
// scripts/start.mjs at the root runs it itself first when dist/start is missing or older than a file
// it was built from (dist/start/build.json lists them), so an edited checkout never starts stale code.
//
// Node modules stay imports, each resolved where its importing source would resolve it: from the root
// node_modules by name, from a package's own nested node_modules (a different version) by path.
// `import.meta.url` in a workspace source is replaced by that source file's own URL (relative to the
// bundle, so the checkout may move), so paths it computes (STATE_DIR's default, the key-service's
// migrations) stay what they are when it runs from source.
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const serverDir = fileURLToPath(new URL('..', import.meta.url));
const repoRoot = resolve(serverDir, '../..');
const rootModules = join(repoRoot, 'node_modules') + sep;
export const startDir = join(serverDir, 'dist', 'start');
/** What scripts/start.mjs reads to tell whether dist/start is current. */
export const BUILD_INFO = 'build.json';
/** Files that shape the build without being among esbuild's inputs. */
const BUILD_FILES = ['package.json', 'scripts/bundle.mjs'];
const ENTRIES = [
  { source: 'src/main.ts', out: 'main.js' },
  // Its few node modules (ora, pino-pretty) compiled in: one module instead of dozens, ~8 MB less
  // resident memory for a process that runs all day.
  { source: 'src/launcher/launch.ts', out: 'launcher/launch.js', withNodeModules: true },
];

/**
 * Builds dist/start afresh; resolves with the number of milliseconds it took. Written beside the old
 * one and swapped in by renames, so a concurrent start never reads a half-written one.
 */
export async function bundle() {
  const started = Date.now();
  const { build } = await import('esbuild');
  // Under node_modules, so that nothing (git, prettier, eslint) sees what a crash leaves.
  const scratch = join(serverDir, 'node_modules', '.cache');
  mkdirSync(scratch, { recursive: true });
  const staging = mkdtempSync(join(scratch, 'start-'));
  try {
    const inputs = new Set(BUILD_FILES.map((file) => join(serverDir, file)));
    for (const entry of ENTRIES) {
      // Placed where it ends up in dist/start: relative paths written into it are relative to that.
      const finalDir = dirname(join(startDir, entry.out));
      const result = await build({
        entryPoints: [join(serverDir, entry.source)],
        outfile: join(staging, entry.out),
        bundle: true,
        format: 'esm',
        platform: 'node',
        target: 'node20',
        conditions: ['@svc/source'],
        plugins: [
          ...(entry.withNodeModules ? [] : [nodeModulesWhereImported(finalDir)]),
          sourceLocations(finalDir),
        ],
        // The CommonJS modules compiled in call require().
        ...(entry.withNodeModules
          ? {
              banner: {
                js: "import { createRequire as __svcCreateRequire } from 'node:module'; const require = __svcCreateRequire(import.meta.url);",
              },
            }
          : {}),
        sourcemap: true,
        metafile: true,
        logLevel: 'warning',
      });
      for (const input of Object.keys(result.metafile.inputs)) inputs.add(resolve(process.cwd(), input));
    }
    const info = { builtAt: started, inputs: [...inputs].map((file) => relative(serverDir, file)) };
    writeFileSync(join(staging, BUILD_INFO), `${JSON.stringify(info, null, 2)}\n`);
    // Another start that found dist/start stale at the same moment built it as well: keep the one in place.
    if (builtAt(startDir) >= started) rmSync(staging, { recursive: true, force: true });
    else swapIn(staging);
  } catch (error) {
    rmSync(staging, { recursive: true, force: true });
    throw error;
  }
  return Date.now() - started;
}

/**
 * Workspace packages (`@svc/*`) are compiled in; every other bare import stays an import. One the root
 * node_modules serves keeps its name; one a package's own node_modules serves (another version than the
 * root's) is imported by its path, relative to the output file.
 */
function nodeModulesWhereImported(outDir) {
  return {
    name: 'node-modules-where-imported',
    setup(build) {
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.path.startsWith('@svc/') || args.path.startsWith('node:') || args.pluginData?.inner)
          return undefined;
        const resolved = await build.resolve(args.path, {
          kind: args.kind,
          resolveDir: args.resolveDir,
          importer: args.importer,
          pluginData: { inner: true },
        });
        if (resolved.errors.length > 0 || !resolved.path || resolved.external)
          return { path: args.path, external: true };
        if (resolved.path.startsWith(rootModules) || !resolved.path.includes(`${sep}node_modules${sep}`))
          return { path: args.path, external: true };
        const path = relative(outDir, resolved.path).split(sep).join('/');
        return { path: path.startsWith('.') ? path : `./${path}`, external: true };
      });
    },
  };
}

/** `import.meta.url` in a workspace source becomes that source's URL, computed from the bundle's. */
function sourceLocations(outDir) {
  return {
    name: 'source-locations',
    setup(build) {
      build.onLoad({ filter: /\.[cm]?tsx?$/ }, (args) => {
        if (args.path.includes(`${sep}node_modules${sep}`)) return undefined;
        const contents = readFileSync(args.path, 'utf8');
        if (!contents.includes('import.meta.url')) return undefined;
        const fromBundle = relative(outDir, args.path).split(sep).join('/');
        return {
          contents: contents.replaceAll(
            'import.meta.url',
            `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`,
          ),
          loader: args.path.endsWith('x') ? 'tsx' : 'ts',
        };
      });
    },
  };
}

/** When the build in `dir` started, or 0 when there is none. */
function builtAt(dir) {
  try {
    return JSON.parse(readFileSync(join(dir, BUILD_INFO), 'utf8')).builtAt;
  } catch {
    return 0;
  }
}

function swapIn(staging) {
  mkdirSync(dirname(startDir), { recursive: true });
  const retired = `${staging}-old`;
  try {
    renameSync(startDir, retired);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  try {
    renameSync(staging, startDir);
  } catch (error) {
    // Another start built it at the same moment: theirs is as new as ours.
    if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
    rmSync(staging, { recursive: true, force: true });
  }
  rmSync(retired, { recursive: true, force: true });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    const ms = await bundle();
    console.log(`npm start: built ${relative(repoRoot, startDir)} in ${ms} ms`);
  } catch (error) {
    // At install a source that does not compile (a checkout mid-edit) must not fail `npm install`:
    // `npm start` tries again when it runs, and says then what is wrong.
    if (!process.argv.includes('--at-install')) throw error;
    console.warn(
      `npm start: ${relative(repoRoot, startDir)} not built (${error.message}); npm start builds it when it runs`,
    );
  }
}
