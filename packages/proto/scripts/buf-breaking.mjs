#!/usr/bin/env node
// `buf breaking` of the proto root against the previous commit (rule set in proto/buf.yaml), run by this
// package's tests. The working tree is compared with HEAD~1, so both the last commit and uncommitted edits
// are covered. Where there is nothing to compare with (no git, not a git checkout, a shallow clone or a
// first commit without HEAD~1, no proto/ at HEAD~1) it says so and exits 0; a breaking change exits 1.
import { spawnSync } from 'node:child_process';
import { delimiter, join, resolve } from 'node:path';

const packageDir = resolve(import.meta.dirname, '..');
const repoRoot = resolve(packageDir, '..', '..');
const protoDir = 'proto';
const against = 'HEAD~1';

// buf from node_modules/.bin (this package's first, then the workspace root's), as in generate.mjs.
const localBins = [join(packageDir, 'node_modules', '.bin'), join(repoRoot, 'node_modules', '.bin')];
const env = { ...process.env, PATH: [...localBins, process.env.PATH ?? ''].join(delimiter) };

function git(...args) {
  const result = spawnSync('git', args, { cwd: repoRoot, encoding: 'utf8' });
  return { ok: !result.error && result.status === 0, out: (result.stdout ?? '').trim(), error: result.error };
}

function skip(reason) {
  console.log(`buf breaking: SKIPPED, ${reason}; breaking changes to ${protoDir}/ are not checked here.`);
  return 0;
}

function main() {
  const toplevel = git('rev-parse', '--show-toplevel');
  if (toplevel.error) return skip(`git is not available (${toplevel.error.message})`);
  if (!toplevel.ok || resolve(toplevel.out) !== repoRoot) return skip(`${repoRoot} is not a git checkout`);
  const base = git('rev-parse', '--verify', '--quiet', `${against}^{commit}`);
  if (!base.ok) {
    const shallow = git('rev-parse', '--is-shallow-repository').out === 'true';
    return skip(
      shallow
        ? `this is a shallow clone without ${against} (fetch more history, e.g. \`git fetch --deepen=1\`)`
        : `HEAD has no parent commit (${against} does not exist)`,
    );
  }
  if (!git('cat-file', '-e', `${base.out}:${protoDir}`).ok) {
    return skip(`${protoDir}/ does not exist at ${against} (${base.out.slice(0, 12)})`);
  }
  // The commit by hash, so HEAD is this checkout's even in a linked worktree; buf reads the git directory.
  const gitDir = resolve(repoRoot, git('rev-parse', '--git-common-dir').out);
  const input = `${gitDir}#format=git,ref=${base.out},subdir=${protoDir}`;
  const result = spawnSync('buf', ['breaking', protoDir, '--against', input, '--error-format', 'text'], {
    cwd: repoRoot,
    env,
    encoding: 'utf8',
  });
  if (result.error) {
    console.error(`buf breaking: could not run buf (${result.error.message}); is @bufbuild/buf installed?`);
    return 1;
  }
  if (result.status === 0) {
    console.log(
      `buf breaking: no breaking change in ${protoDir}/ against ${against} (${base.out.slice(0, 12)})`,
    );
    return 0;
  }
  process.stderr.write(result.stdout + result.stderr);
  console.error(
    result.status === 100
      ? `buf breaking: ${protoDir}/ breaks compatibility with ${against} (${base.out.slice(0, 12)}); see above`
      : `buf breaking failed (exit ${result.status}) against ${against} (${base.out.slice(0, 12)}); see above`,
  );
  return 1;
}

process.exitCode = main();
