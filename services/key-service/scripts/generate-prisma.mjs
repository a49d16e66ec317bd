#!/usr/bin/env node
// Generates the Prisma client (prisma/schema.prisma → src/gen/prisma) and formats it with the repository's
// prettier settings, so the checked-in client passes `prettier --check` and diffs stay readable.
//
//   node scripts/generate-prisma.mjs          regenerate src/gen/prisma
//   node scripts/generate-prisma.mjs --check  generate into a temporary directory and compare file by file with
//                                             what is in the tree; exit 1 listing the stale files, else exit 0
//
// Generation runs on a copy of the schema in a temporary directory (same relative output path, so the schema
// text Prisma inlines into the client is identical) and is then synced into place: a failed run never leaves
// half-written output, and unchanged files keep their timestamps.
import { spawnSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  rmdirSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import * as prettier from 'prettier';

const packageDir = resolve(import.meta.dirname, '..');
const repoRoot = resolve(packageDir, '..', '..');
const schemaFile = join(packageDir, 'prisma', 'schema.prisma');
const target = join(packageDir, 'src', 'gen', 'prisma');

// The Prisma CLI comes from node_modules/.bin (this package's first, then the workspace root's). The schema
// engine is never needed to generate a client; pointing it at /bin/true stops the CLI from downloading one.
const localBins = [join(packageDir, 'node_modules', '.bin'), join(repoRoot, 'node_modules', '.bin')];
const env = {
  ...process.env,
  PATH: [...localBins, process.env.PATH ?? ''].join(delimiter),
  PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? '/bin/true',
  PRISMA_HIDE_UPDATE_MESSAGE: '1',
};

class GenerationFailed extends Error {}

function prismaGenerate(workDir) {
  const schemaCopy = join(workDir, 'prisma', 'schema.prisma');
  mkdirSync(dirname(schemaCopy), { recursive: true });
  copyFileSync(schemaFile, schemaCopy);
  const result = spawnSync('prisma', ['generate', '--schema', schemaCopy, '--no-hints'], {
    cwd: packageDir,
    env,
    encoding: 'utf8',
  });
  if (result.error) throw new GenerationFailed(`could not run prisma (${result.error.message})`);
  if (result.status !== 0)
    throw new GenerationFailed(`prisma generate failed:\n${result.stderr}${result.stdout}`);
  const generated = join(workDir, relative(packageDir, target));
  if (!existsSync(generated)) {
    throw new GenerationFailed(
      `prisma generate wrote nothing to ${relative(packageDir, target)}; did the output change?`,
    );
  }
  return generated;
}

/** Every file below `dir` as a path relative to it, sorted; an absent directory has none. */
function listFiles(dir) {
  if (!existsSync(dir)) return [];
  const files = [];
  const walk = (current) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path);
      else files.push(relative(dir, path));
    }
  };
  walk(dir);
  return files.sort();
}

async function formatAll(dir) {
  const options = (await prettier.resolveConfig(join(target, 'client.ts'))) ?? {};
  for (const file of listFiles(dir)) {
    const path = join(dir, file);
    const source = readFileSync(path, 'utf8');
    writeFileSync(path, await prettier.format(source, { ...options, filepath: join(target, file) }));
  }
}

function compare(generated) {
  const fresh = listFiles(generated);
  const present = new Set(listFiles(target));
  const freshSet = new Set(fresh);
  const same = (file) => readFileSync(join(generated, file)).equals(readFileSync(join(target, file)));
  return {
    fresh,
    missing: fresh.filter((file) => !present.has(file)),
    different: fresh.filter((file) => present.has(file) && !same(file)),
    extra: [...present].filter((file) => !freshSet.has(file)).sort(),
  };
}

function removeEmptyDirectories(dir) {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) removeEmptyDirectories(join(dir, entry.name));
  }
  if (readdirSync(dir).length === 0) rmdirSync(dir);
}

function sync(generated, diff) {
  for (const file of [...diff.missing, ...diff.different]) {
    mkdirSync(dirname(join(target, file)), { recursive: true });
    copyFileSync(join(generated, file), join(target, file));
  }
  for (const file of diff.extra) rmSync(join(target, file));
  removeEmptyDirectories(target);
  mkdirSync(target, { recursive: true });
}

async function main() {
  const check = process.argv.includes('--check');
  const workDir = mkdtempSync(join(tmpdir(), 'svc-prisma-gen-'));
  try {
    const generated = prismaGenerate(workDir);
    await formatAll(generated);
    const diff = compare(generated);
    const show = (file) => relative(repoRoot, join(target, file));
    if (!check) {
      sync(generated, diff);
      const changed = diff.missing.length + diff.different.length + diff.extra.length;
      console.log(
        `prisma client: ${diff.fresh.length} files in ${relative(repoRoot, target)}, ${changed} changed`,
      );
      return 0;
    }
    const stale = [
      ...diff.missing.map((file) => `missing    ${show(file)}`),
      ...diff.different.map((file) => `different  ${show(file)}`),
      ...diff.extra.map((file) => `extra      ${show(file)}`),
    ];
    if (stale.length > 0) {
      console.error(
        'The Prisma client is stale; run `npm run generate -w @svc/key-service` and commit the result:',
      );
      for (const line of stale) console.error(`  ${line}`);
      return 1;
    }
    console.log(`Prisma client is current (${diff.fresh.length} files).`);
    return 0;
  } catch (error) {
    if (error instanceof GenerationFailed) {
      console.error(error.message);
      return 2;
    }
    throw error;
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

process.exitCode = await main();
