// One jest setup for every workspace: TypeScript ESM compiled by swc, workspace packages resolved
// to their sources through the `@svc/source` export condition (no build needed before a test).
//
// Two projects per package, which together match every `test/**/*.test.ts` once:
// - `unit`: the `*.unit.test.ts` files, which need no chain, database, Redis, Kafka, browser or child
//   process; jest.unit-setup.js points every service URL at a closed port and refuses child processes, so
//   one that reaches for a service fails at once. `npm run test:unit` (jest `--selectProjects unit`).
// - the package's name: every other test file, with the services `npm test` needs (README, Tests).
import { basename, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const unitSetup = fileURLToPath(new URL('./jest.unit-setup.js', import.meta.url));

// Options of the whole run rather than of one project (jest reads testTimeout from the run's options only).
const GLOBAL_OPTIONS = ['maxWorkers', 'testTimeout'];

export function packageJestConfig(configUrl, overrides = {}) {
  const rootDir = dirname(fileURLToPath(configUrl));
  const shared = {
    rootDir,
    testEnvironment: 'node',
    testEnvironmentOptions: { customExportConditions: ['@svc/source', 'node', 'node-addons'] },
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
  };
  const global = Object.fromEntries(
    Object.entries(overrides).filter(([key]) => GLOBAL_OPTIONS.includes(key)),
  );
  const project = Object.fromEntries(
    Object.entries(overrides).filter(([key]) => !GLOBAL_OPTIONS.includes(key)),
  );
  return {
    testTimeout: 30_000,
    ...global,
    projects: [
      {
        ...shared,
        displayName: 'unit',
        testMatch: ['<rootDir>/test/**/*.unit.test.ts'],
        setupFiles: [unitSetup],
      },
      {
        ...shared,
        displayName: basename(rootDir),
        testMatch: ['<rootDir>/test/**/*.test.ts'],
        testPathIgnorePatterns: ['/node_modules/', '\\.unit\\.test\\.ts$'],
        ...project,
      },
    ],
  };
}
