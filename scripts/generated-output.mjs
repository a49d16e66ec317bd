/**
 * The one way a generator script writes generated code (see docs/development.md, "Generated code").
 *
 * A generator lists its outputs: a target directory and a function that writes the complete contents of that
 * directory into an empty temporary directory. Then either
 *   - sync (default): each target is made to hold exactly the generated files; only files whose bytes differ are
 *     rewritten and files no longer generated are removed, so a failed run never leaves half-written output and
 *     unchanged files keep their timestamps (incremental tsc and turbo stay warm);
 *   - check (`--check`; also when `CI` is set and the output is committed, unless `--write` is given): nothing
 *     is written; every stale, missing or extra file is named and the exit code is 1.
 * A generation that fails (or writes no files) exits 2.
 *
 * Plain ESM with no dependencies, imported by path so no build step runs first:
 *
 *   import { GenerationFailed, runGenerator } from '../../../scripts/generated-output.mjs';
 *   await runGenerator({
 *     title: 'proto',
 *     regenerate: 'npm run generate -w @svc/proto',
 *     committed: true,
 *     outputs: [{ target: '/abs/path/src/gen', generate: async (scratch) => scratch }],
 *   });
 *
 * `generate(scratch)` may return the directory it actually wrote to (a tool with a fixed layout writes below
 * `scratch`); returning nothing means `scratch` itself. Throw `GenerationFailed` for a one-line error message.
 */
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmdirSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';

/** The repository root (this file is in its `scripts/`). */
export const repoRoot = resolve(import.meta.dirname, '..');

/** A generation failure whose message says it all (no stack trace is printed). */
export class GenerationFailed extends Error {}

/**
 * Every file below `dir` as a path relative to it, sorted; an absent directory has none.
 * @param {string} dir
 * @returns {string[]}
 */
export function listFiles(dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => !entry.isDirectory())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)))
    .sort();
}

function compare(generated, target) {
  const fresh = listFiles(generated);
  const present = new Set(listFiles(target));
  const freshSet = new Set(fresh);
  const same = (file) => readFileSync(join(generated, file)).equals(readFileSync(join(target, file)));
  return {
    fresh,
    missing: fresh.filter((file) => !present.has(file)),
    stale: fresh.filter((file) => present.has(file) && !same(file)),
    extra: [...present].filter((file) => !freshSet.has(file)).sort(),
  };
}

function removeEmptyDirectories(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) removeEmptyDirectories(join(dir, entry.name));
  }
  if (readdirSync(dir).length === 0) rmdirSync(dir);
}

function sync(generated, target, diff) {
  for (const file of [...diff.missing, ...diff.stale]) {
    mkdirSync(dirname(join(target, file)), { recursive: true });
    copyFileSync(join(generated, file), join(target, file));
  }
  for (const file of diff.extra) rmSync(join(target, file));
  removeEmptyDirectories(target);
  mkdirSync(target, { recursive: true });
}

function inCI() {
  const value = (process.env.CI ?? '').toLowerCase();
  return value !== '' && value !== '0' && value !== 'false';
}

/**
 * Generates every output, then syncs it into place or checks it; sets `process.exitCode` and returns it.
 * @param {object} options
 * @param {string} options.title what is generated, for messages ("proto code", "Prisma client")
 * @param {string} options.regenerate the command that regenerates it, printed when it is stale
 * @param {boolean} options.committed whether the output is committed (then CI checks instead of writing)
 * @param {{ target: string, generate: (scratch: string) => string | void | Promise<string | void> }[]} options.outputs
 * @param {string[]} [options.argv] the script's arguments (default: process.argv)
 * @returns {Promise<number>} 0 written or current, 1 stale (check), 2 generation failed
 */
export async function runGenerator({ title, regenerate, committed, outputs, argv = process.argv.slice(2) }) {
  const checkForCI = committed && inCI() && !argv.includes('--write');
  const check = argv.includes('--check') || checkForCI;
  const show = (target, file = '') => relative(repoRoot, join(target, file)) || '.';
  const workDir = mkdtempSync(join(tmpdir(), 'svc-generate-'));
  try {
    const problems = [];
    let fileCount = 0;
    for (const [index, { target, generate }] of outputs.entries()) {
      const scratch = join(workDir, String(index));
      mkdirSync(scratch);
      const generated = (await generate(scratch)) ?? scratch;
      const diff = compare(generated, target);
      if (diff.fresh.length === 0)
        throw new GenerationFailed(`${title}: nothing generated for ${show(target)}`);
      fileCount += diff.fresh.length;
      if (check) {
        problems.push(
          ...diff.stale.map((file) => `stale    ${show(target, file)}`),
          ...diff.missing.map((file) => `missing  ${show(target, file)}`),
          ...diff.extra.map((file) => `extra    ${show(target, file)}`),
        );
        continue;
      }
      sync(generated, target, diff);
      const changed = diff.missing.length + diff.stale.length + diff.extra.length;
      console.log(`${title}: ${diff.fresh.length} files in ${show(target)}, ${changed} changed`);
    }
    if (!check) return (process.exitCode = 0);
    if (problems.length === 0) {
      console.log(`${title}: generated code is current (${fileCount} files)`);
      return (process.exitCode = 0);
    }
    console.error(
      `${title}: generated code differs from a fresh generation; run \`${regenerate}\`` +
        (committed ? ' and commit the result' : '') +
        (checkForCI ? ' (CI is set, so this only checks; --write forces writing)' : '') +
        ':',
    );
    for (const line of problems) console.error(`  ${line}`);
    return (process.exitCode = 1);
  } catch (error) {
    console.error(error instanceof GenerationFailed ? error.message : error);
    return (process.exitCode = 2);
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}
