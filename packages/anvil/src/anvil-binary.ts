import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const ARCHITECTURES: Partial<Record<NodeJS.Architecture, string>> = { x64: 'amd64', arm64: 'arm64' };

/**
 * Path of the native anvil binary shipped by `@foundry-rs/anvil`'s platform package. The native
 * binary is spawned directly rather than the package's node wrapper, so that stopping the process
 * we started really stops anvil.
 */
export function resolveAnvilBinary(): string {
  const arch = ARCHITECTURES[process.arch];
  if (!arch) throw new Error(`anvil: no @foundry-rs/anvil build for architecture ${process.arch}`);
  const platformPackage = `@foundry-rs/anvil-${process.platform}-${arch}`;
  const executable = process.platform === 'win32' ? 'anvil.exe' : 'anvil';
  const require = createRequire(import.meta.url);
  // npm may hoist the platform package or nest it under @foundry-rs/anvil.
  const searchFrom = [import.meta.url, require.resolve('@foundry-rs/anvil/package.json')];
  for (const from of searchFrom) {
    try {
      const packageJson = createRequire(from).resolve(`${platformPackage}/package.json`);
      const binary = join(dirname(packageJson), 'bin', executable);
      if (existsSync(binary)) return binary;
    } catch {
      // not installed from this location; try the next one
    }
  }
  throw new Error(
    `anvil: ${platformPackage} is not installed (it is an optional dependency of @foundry-rs/anvil)`,
  );
}
