// One jest setup for every workspace: TypeScript ESM compiled by swc, workspace packages resolved
// to their sources through the `@svc/source` export condition (no build needed before a test).
import { basename, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

export function packageJestConfig(configUrl, overrides = {}) {
  const rootDir = dirname(fileURLToPath(configUrl));
  return {
    displayName: basename(rootDir),
    rootDir,
    testEnvironment: 'node',
    testEnvironmentOptions: { customExportConditions: ['@svc/source', 'node', 'node-addons'] },
    testMatch: ['<rootDir>/test/**/*.test.ts'],
    extensionsToTreatAsEsm: ['.ts'],
    moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
    transform: {
      '^.+\\.ts$': [
        '@swc/jest',
        {
          jsc: { parser: { syntax: 'typescript' }, target: 'es2023', keepClassNames: true },
          module: { type: 'es6' },
          sourceMaps: 'inline',
        },
      ],
    },
    testTimeout: 30_000,
    ...overrides,
  };
}
