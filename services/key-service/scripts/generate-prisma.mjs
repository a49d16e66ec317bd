#!/usr/bin/env node
// Generates the Prisma client (prisma/schema.prisma → src/gen/prisma), formatted with the repository's
// prettier settings so it reads like the rest of the code.
//
//   node scripts/generate-prisma.mjs   regenerate src/gen/prisma
//
// The client is not committed: turbo runs this (`generate`) before typecheck, lint, test and build. Writing
// goes through scripts/generated-output.mjs at the repository root. Prisma runs on a copy of the schema in a
// temporary directory (same relative output path, so the schema text it inlines into the client is identical).
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { delimiter, dirname, join, relative, resolve } from 'node:path';
import * as prettier from 'prettier';
import { GenerationFailed, listFiles, repoRoot, runGenerator } from '../../../scripts/generated-output.mjs';

const packageDir = resolve(import.meta.dirname, '..');
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

async function formatAll(dir) {
  const options = (await prettier.resolveConfig(join(target, 'client.ts'))) ?? {};
  for (const file of listFiles(dir)) {
    const path = join(dir, file);
    const source = readFileSync(path, 'utf8');
    writeFileSync(path, await prettier.format(source, { ...options, filepath: join(target, file) }));
  }
}

await runGenerator({
  title: 'Prisma client',
  regenerate: 'npm run generate -w @svc/key-service',
  committed: false,
  outputs: [
    {
      target,
      generate: async (scratch) => {
        const generated = prismaGenerate(scratch);
        await formatAll(generated);
        return generated;
      },
    },
  ],
});
