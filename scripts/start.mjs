// `npm start`: the launcher of the all-in-one mode, compiled: apps/server/dist/start/launcher/launch.js,
// which runs the server as dist/start/main.js (built by apps/server/scripts/bundle.mjs, which
// `npm install` runs). When dist/start is missing, or a file it was built from (its list is
// dist/start/build.json) changed since, it is built again first (esbuild, about a second), so an edited
// checkout never starts stale code. The check is a stat of each listed file, a few milliseconds.
import { readFileSync, statSync } from 'node:fs';

const serverDir = new URL('../apps/server/', import.meta.url);

function isCurrent() {
  let info;
  try {
    info = JSON.parse(readFileSync(new URL('dist/start/build.json', serverDir), 'utf8'));
  } catch {
    return false;
  }
  try {
    return info.inputs.every((input) => statSync(new URL(input, serverDir)).mtimeMs <= info.builtAt);
  } catch {
    return false; // a file it was built from is gone
  }
}

if (!isCurrent()) {
  const { bundle } = await import('../apps/server/scripts/bundle.mjs');
  try {
    await bundle();
  } catch {
    // esbuild has said what does not compile, and where.
    process.stderr.write('npm start: apps/server/dist/start cannot be built from its sources (above)\n');
    process.exit(1);
  }
}
await import('../apps/server/dist/start/launcher/launch.js');
