import { packageJestConfig } from '../../jest.preset.js';

// helm is extracted once (scripts/helm.mjs, cached under node_modules/.cache) before any test file runs.
export default packageJestConfig(import.meta.url, {
  globalSetup: '<rootDir>/test/support/global-setup.js',
  testTimeout: 60_000,
});
