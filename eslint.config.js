import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

const SERVICES = ['gateway', 'key-service', 'job-orchestrator', 'payment-settler', 'worker'];
const APPS = ['server', 'cli', 'console', 'e2e', 'deployment'];

/** A no-restricted-imports pattern refusing the named workspaces of one layer, by package name or path. */
function layer(names, importer) {
  const folder = names === SERVICES ? 'services' : 'apps';
  return {
    regex: `^(@svc/(${names.join('|')})(/.*)?|(\\.\\./)+${folder}/.*)$`,
    message: `${importer} does not import from ${folder}/: dependencies go apps -> services -> packages.`,
  };
}

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      '**/.turbo/**',
      '**/src/gen/**',
      '**/test/gen/**',
      '**/coverage/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['**/*.ts', '**/*.tsx'],
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'error',
      'no-duplicate-imports': ['error', { allowSeparateTypeImports: true }],
    },
  },
  // Layering: apps -> services -> packages. A package imports no service or app; a service's code imports
  // no app and no other service (its tests may run another service beside it).
  {
    files: ['packages/**/*.ts', 'packages/**/*.tsx'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [layer(SERVICES, 'a package'), layer(APPS, 'a package')] },
      ],
    },
  },
  {
    files: ['services/*/src/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [layer(SERVICES, "a service's code"), layer(APPS, 'a service')] },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', URL: 'readonly' } },
  },
  {
    files: ['**/test/**/*.ts', '**/bench/**/*.ts', 'scripts/**'],
    rules: { 'no-console': 'off' },
  },
);
