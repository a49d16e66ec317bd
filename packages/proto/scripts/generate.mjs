#!/usr/bin/env node
// Generates the protobuf-es code of the proto roots with `buf generate` and the local protoc-gen-es.
//
//   node scripts/generate.mjs          regenerate src/gen (from proto/) and test/gen (from test/proto/)
//   node scripts/generate.mjs --check  compare a fresh generation with the committed code, file by file
//
// The output is committed (it is the wire contract); writing and checking go through
// scripts/generated-output.mjs at the repository root.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join, relative, resolve } from 'node:path';
import { GenerationFailed, repoRoot, runGenerator } from '../../../scripts/generated-output.mjs';

const packageDir = resolve(import.meta.dirname, '..');
const template = join(packageDir, 'buf.gen.yaml');
// buf.gen.yaml writes to this directory below the --output base.
const templateOut = join('src', 'gen');

// buf and protoc-gen-es come from node_modules/.bin (this package's first, then the workspace root's), so
// whatever is installed globally never decides what the generated code looks like.
const localBins = [join(packageDir, 'node_modules', '.bin'), join(repoRoot, 'node_modules', '.bin')];
const env = { ...process.env, PATH: [...localBins, process.env.PATH ?? ''].join(delimiter) };

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

await runGenerator({
  title: 'proto code',
  regenerate: 'npm run generate -w @svc/proto',
  committed: true,
  outputs: [
    // Service protos, and the test-only protos of this package's own tests.
    { input: join(repoRoot, 'proto'), target: join(packageDir, 'src', 'gen') },
    { input: join(packageDir, 'test', 'proto'), target: join(packageDir, 'test', 'gen') },
  ].map(({ input, target }) => ({ target, generate: (scratch) => bufGenerate(input, scratch) })),
});
