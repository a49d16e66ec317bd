#!/usr/bin/env node
// `svc`: runs the compiled command line, apps/cli/dist/main.js (scripts/build.mjs), in this process.
// When dist is missing, or a file it was built from (its list is dist/build.json) changed since, it is
// built again first (esbuild, well under a second), so an edited checkout never runs stale code. The
// check is a stat of each listed file, about a millisecond.
import { readFileSync, statSync } from 'node:fs';

const cliDir = new URL('../', import.meta.url);

function isCurrent() {
  let info;
  try {
    info = JSON.parse(readFileSync(new URL('dist/build.json', cliDir), 'utf8'));
  } catch {
    return false;
  }
  try {
    return info.inputs.every((input) => statSync(new URL(input, cliDir)).mtimeMs <= info.builtAt);
  } catch {
    return false; // a file it was built from is gone
  }
}

if (!isCurrent()) {
  const { build } = await import('../scripts/build.mjs');
  try {
    await build();
  } catch {
    // esbuild has said what does not compile, and where.
    process.stderr.write('svc: apps/cli/dist cannot be built from its sources (above); svc did not run\n');
    process.exit(1);
  }
}
await import('../dist/main.js');
