#!/usr/bin/env node
// Generates the protobuf-es code of the proto roots with `buf generate` and the local protoc-gen-es.
//
//   node scripts/generate.mjs          regenerate src/gen (from proto/) and test/gen (from test/proto/)
//   node scripts/generate.mjs --check  generate into a temporary directory and compare file by file with
//                                      what is in the tree; exit 1 listing the stale files, else exit 0
//
// Generation always goes through a temporary directory and is then synced into place, so a failed run never
// leaves half-written output and unchanged files keep their timestamps (incremental tsc and turbo stay warm).
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
} from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, relative, resolve } from 'node:path';

const packageDir = resolve(import.meta.dirname, '..');
const repoRoot = resolve(packageDir, '..', '..');
const template = join(packageDir, 'buf.gen.yaml');
// buf.gen.yaml writes to this directory below the --output base.
const templateOut = join('src', 'gen');

const generations = [
  { name: 'service protos', input: join(repoRoot, 'proto'), target: join(packageDir, 'src', 'gen') },
  { name: 'test protos', input: join(packageDir, 'test', 'proto'), target: join(packageDir, 'test', 'gen') },
];

// buf and protoc-gen-es come from node_modules/.bin (this package's first, then the workspace root's), so
// whatever is installed globally never decides what the generated code looks like.
const localBins = [join(packageDir, 'node_modules', '.bin'), join(repoRoot, 'node_modules', '.bin')];
const env = { ...process.env, PATH: [...localBins, process.env.PATH ?? ''].join(delimiter) };

class GenerationFailed extends Error {}

function bufGenerate(input, outputBase) {
  const result = spawnSync(
    'buf',
    ['generate', input, '--template', template, '--output', outputBase, '--error-format', 'text'],
    { cwd: packageDir, env, encoding: 'utf8' },
  );
  if (result.error) {
    throw new GenerationFailed(`could not run buf (${result.error.message}); is @bufbuild/buf installed?`);
  }
  if (result.status !== 0) {
    throw new GenerationFailed(
      `buf generate ${relative(repoRoot, input)} failed:\n${result.stderr}${result.stdout}`,
    );
  }
  const generated = join(outputBase, templateOut);
  if (!existsSync(generated)) {
    throw new GenerationFailed(
      `buf generate wrote nothing to ${templateOut}; does buf.gen.yaml still write there?`,
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

function sameContent(a, b) {
  return readFileSync(a).equals(readFileSync(b));
}

/** How `target` differs from freshly generated `generated`. */
function compare(generated, target) {
  const fresh = listFiles(generated);
  const present = new Set(listFiles(target));
  const freshSet = new Set(fresh);
  return {
    fresh,
    missing: fresh.filter((file) => !present.has(file)),
    different: fresh.filter(
      (file) => present.has(file) && !sameContent(join(generated, file), join(target, file)),
    ),
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

/** Makes `target` hold exactly the generated files, touching only those that changed. */
function sync(generated, target, diff) {
  for (const file of [...diff.missing, ...diff.different]) {
    mkdirSync(dirname(join(target, file)), { recursive: true });
    copyFileSync(join(generated, file), join(target, file));
  }
  for (const file of diff.extra) rmSync(join(target, file));
  removeEmptyDirectories(target);
  mkdirSync(target, { recursive: true });
}

function main() {
  const check = process.argv.includes('--check');
  const workDir = mkdtempSync(join(tmpdir(), 'svc-proto-gen-'));
  try {
    const stale = [];
    let fileCount = 0;
    generations.forEach((generation, index) => {
      const generated = bufGenerate(generation.input, join(workDir, String(index)));
      const diff = compare(generated, generation.target);
      fileCount += diff.fresh.length;
      const show = (file) => relative(repoRoot, join(generation.target, file));
      if (check) {
        stale.push(
          ...diff.missing.map((file) => `missing    ${show(file)}`),
          ...diff.different.map((file) => `different  ${show(file)}`),
          ...diff.extra.map((file) => `extra      ${show(file)}`),
        );
      } else {
        sync(generated, generation.target, diff);
        const changed = diff.missing.length + diff.different.length + diff.extra.length;
        console.log(
          `${generation.name}: ${diff.fresh.length} files in ${relative(repoRoot, generation.target)}, ${changed} changed`,
        );
      }
    });
    if (check && stale.length > 0) {
      console.error(`Generated code is stale; run \`npm run generate -w @svc/proto\` and commit the result:`);
      for (const line of stale) console.error(`  ${line}`);
      return 1;
    }
    if (check) console.log(`Generated code is current (${fileCount} files).`);
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

process.exitCode = main();
