#!/usr/bin/env node
// Compiles the Solidity sources with solc-js into TypeScript modules: `<name>Abi` (as const) and
// `<name>Bytecode` per contract, plus TypeChain's ethers-v6 contract types under `typechain/`.
//   node scripts/compile.mjs           regenerate src/gen/ and test/gen/
//   node scripts/compile.mjs --check   compare a fresh compile with the committed artifacts, file by file
// Source unit names are package-relative and solc-js is pinned, so the output (metadata hash
// included) is the same on every machine. The artifacts are committed (they are the on-chain contract,
// and solc-js is slow); writing and checking go through scripts/generated-output.mjs at the repository root.
import {
  readFileSync,
  readdirSync,
  mkdirSync,
  mkdtempSync,
  writeFileSync,
  existsSync,
  rmSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as prettier from 'prettier';
import solc from 'solc';
import { runTypeChain } from 'typechain';
import { GenerationFailed, listFiles, runGenerator } from '../../../scripts/generated-output.mjs';

const require = createRequire(import.meta.url);
const packageRoot = join(dirname(fileURLToPath(import.meta.url)), '..');
const openZeppelinRoot = dirname(require.resolve('@openzeppelin/contracts/package.json'));

// EIP-170: a larger runtime cannot be deployed on a real chain.
const MAX_RUNTIME_BYTES = 24_576;

const SETTINGS = {
  // Cancun is the first fork with BLOBHASH and transient storage; later forks run this code as is.
  evmVersion: 'cancun',
  // Through the IR pipeline: JobRegistry's runtime is 21,089 bytes this way; the legacy way it was 25,154 even
  // at 1 run, over EIP-170's 24,576; it also ends the "stack too deep" a function with many calldata
  // arguments (disputeMismatch) runs into.
  optimizer: { enabled: true, runs: 200 },
  viaIR: true,
  outputSelection: { '*': { '*': ['abi', 'evm.bytecode.object', 'evm.deployedBytecode.object'] } },
};

/**
 * Warnings reviewed and accepted, by solc error code. 2394: "transient storage can break composability"
 * (it outlives a call frame). JobBook keeps the transaction's open commit batch there on purpose: every
 * `completeJob` of one transaction, whichever frame runs it, joins the same batch, and a frame that reverts
 * takes its answer out with it (docs/protocol.md, Commit batches).
 */
const ACCEPTED_WARNINGS = new Set(['2394']);

/** Each build: which sources, which contracts to emit, and where. */
const BUILDS = [
  {
    sourceDir: 'contracts',
    outputDir: 'src/gen',
    contracts: ['WorkerRegistry', 'JobRegistry'],
  },
  {
    sourceDir: 'test/contracts',
    outputDir: 'test/gen',
    contracts: ['ReentrantAccount'],
  },
];

function listSolidity(dir) {
  const absolute = join(packageRoot, dir);
  if (!existsSync(absolute)) return [];
  return readdirSync(absolute, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.sol'))
    .map((entry) => relative(packageRoot, join(entry.parentPath, entry.name)).split(sep).join('/'))
    .sort();
}

function findImport(unitName) {
  const path = unitName.startsWith('@openzeppelin/contracts/')
    ? join(openZeppelinRoot, unitName.slice('@openzeppelin/contracts/'.length))
    : join(packageRoot, unitName);
  if (!path.startsWith(openZeppelinRoot) && !path.startsWith(packageRoot)) {
    return { error: `import outside the package and OpenZeppelin: ${unitName}` };
  }
  try {
    return { contents: readFileSync(path, 'utf8') };
  } catch {
    return { error: `not found: ${unitName}` };
  }
}

function compile(build) {
  const sources = Object.fromEntries(
    listSolidity(build.sourceDir).map((unit) => [
      unit,
      { content: readFileSync(join(packageRoot, unit), 'utf8') },
    ]),
  );
  const input = { language: 'Solidity', sources, settings: SETTINGS };
  const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImport }));
  const problems = (output.errors ?? []).filter((problem) => !ACCEPTED_WARNINGS.has(problem.errorCode));
  for (const problem of problems) process.stderr.write(`${problem.formattedMessage}\n`);
  if (problems.length > 0)
    throw new GenerationFailed(`solc reported ${problems.length} error(s) or warning(s)`);

  const artifacts = {};
  for (const [unit, contracts] of Object.entries(output.contracts)) {
    for (const [name, artifact] of Object.entries(contracts)) {
      if (!build.contracts.includes(name) || !unit.startsWith(`${build.sourceDir}/`)) continue;
      const runtimeBytes = artifact.evm.deployedBytecode.object.length / 2;
      if (runtimeBytes > MAX_RUNTIME_BYTES) {
        throw new GenerationFailed(
          `${name} runtime is ${runtimeBytes} bytes, over the ${MAX_RUNTIME_BYTES}-byte limit`,
        );
      }
      artifacts[name] = { abi: artifact.abi, bytecode: `0x${artifact.evm.bytecode.object}`, runtimeBytes };
    }
  }
  for (const name of build.contracts) {
    if (!artifacts[name]) throw new GenerationFailed(`contract ${name} not found under ${build.sourceDir}/`);
  }
  return artifacts;
}

const lowerFirst = (name) => name[0].toLowerCase() + name.slice(1);

/** TypeChain's ethers-v6 contract types for the ABIs. */
async function typechainFiles(artifacts) {
  const workDir = mkdtempSync(join(tmpdir(), 'svc-typechain-'));
  try {
    const abiFiles = Object.entries(artifacts).map(([name, { abi }]) => {
      const path = join(workDir, 'abi', `${name}.json`);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, JSON.stringify(abi));
      return path;
    });
    const outDir = join(workDir, 'out');
    await runTypeChain({
      cwd: workDir,
      filesToProcess: abiFiles,
      allFiles: abiFiles,
      outDir,
      target: 'ethers-v6',
      flags: {
        alwaysGenerateOverloads: false,
        discriminateTypes: false,
        node16Modules: true,
        environment: undefined,
      },
    });
    // Factories would repeat every ABI; src/connect.ts builds typed instances from the constants.
    const files = listFiles(outDir).filter((file) => !file.startsWith('factories/'));
    return Object.fromEntries(
      files.map((file) => {
        const text = readFileSync(join(outDir, file), 'utf8');
        // The index without the factories' exports is type exports only.
        const kept = file === 'index.ts' ? text.split('\n').filter((line) => !/factor/i.test(line)) : [text];
        return [file, kept.join('\n')];
      }),
    );
  } finally {
    rmSync(workDir, { recursive: true, force: true });
  }
}

async function render(build, artifacts) {
  const prettierConfig = (await prettier.resolveConfig(join(packageRoot, build.outputDir, 'index.ts'))) ?? {};
  const format = (text) => prettier.format(text, { ...prettierConfig, parser: 'typescript' });
  const header = `// Generated by scripts/compile.mjs with solc ${solc.version()}: do not edit; run \`npm run generate\`.\n`;
  const files = {};
  for (const name of build.contracts) {
    const { abi, bytecode, runtimeBytes } = artifacts[name];
    files[`${name}.ts`] = await format(
      `${header}// Runtime size: ${runtimeBytes} bytes.\n` +
        `export const ${lowerFirst(name)}Abi = ${JSON.stringify(abi)} as const;\n\n` +
        `export const ${lowerFirst(name)}Bytecode = '${bytecode}' as const;\n`,
    );
  }
  for (const [file, text] of Object.entries(await typechainFiles(artifacts))) {
    files[`typechain/${file}`] = await format(text);
  }
  const typeExports = build.contracts.map((name) => `export type { ${name} } from './typechain/index.js';`);
  files['index.ts'] = await format(
    header +
      build.contracts.map((name) => `export * from './${name}.js';`).join('\n') +
      '\n' +
      typeExports.join('\n') +
      '\n',
  );
  return files;
}

await runGenerator({
  title: 'contract artifacts',
  regenerate: 'npm run generate -w @svc/contracts',
  committed: true,
  outputs: BUILDS.map((build) => ({
    target: join(packageRoot, build.outputDir),
    generate: async (scratch) => {
      for (const [file, text] of Object.entries(await render(build, compile(build)))) {
        mkdirSync(dirname(join(scratch, file)), { recursive: true });
        writeFileSync(join(scratch, file), text);
      }
    },
  })),
});
