// @ts-check
// npm run lint: ESLint with typescript-eslint's type-aware rules (floating and misused
// promises, unsafe `any`), then Prettier's check. Zero warnings: CI fails on any.
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/** Test code: specs, e2e specs, the test support lib and test/ helpers. */
const TEST_FILES = [
  'test/**/*.ts',
  '**/*.spec.ts',
  '**/*.e2e-spec.ts',
  '**/*.browser-spec.ts',
  '**/*.spec-helpers.ts',
  'libs/testing/**/*.ts',
];

export default tseslint.config(
  { ignores: ['**/dist/**', 'node_modules/**', 'coverage/**', '.kiln/**', 'data/**', 'bench/results/**', '.dist-build-*/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
  },
  {
    // The CLI's own tsconfig reads the SDK's built declarations (its package build); lint it
    // against the root program, which reads the SDK's sources, so a fresh clone lints unbuilt.
    files: ['apps/cli/src/**/*.ts'],
    languageOptions: {
      parserOptions: { projectService: false, project: './tsconfig.json', tsconfigRootDir: import.meta.dirname },
    },
  },
  {
    linterOptions: { reportUnusedDisableDirectives: 'error' },
    rules: {
      // The rules a codebase this asynchronous most needs, stricter than the preset's defaults.
      '@typescript-eslint/no-floating-promises': ['error', { ignoreVoid: true }],
      '@typescript-eslint/no-misused-promises': 'error',
      // Passing on a caught value as it came (catch variables are `any` here) is not inventing a non-Error.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // A test reads HTTP answers (supertest's `body`), SQL rows and parsed JSON as `any` by
    // nature and asserts their shape with expect; requiring a type on every such read would
    // add casts, not safety. Promises stay checked here too: an unawaited one is a flaky test.
    files: TEST_FILES,
    rules: {
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-explicit-any': 'off',
      // expect(mock.method).toHaveBeenCalled() passes a method unbound on purpose.
      '@typescript-eslint/unbound-method': 'off',
      // A fake or a mock keeps the async signature of what it stands in for, awaiting nothing.
      '@typescript-eslint/require-await': 'off',
    },
  },
  {
    // Plain JavaScript (build scripts, jest setup, bins): no type information.
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: { ...tseslint.configs.disableTypeChecked.languageOptions, globals: { ...globals.node } },
    rules: { ...tseslint.configs.disableTypeChecked.rules, '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/setup/**/*.js'],
    languageOptions: { globals: { ...globals.jest } },
  },
  {
    files: ['apps/web/src/**/*.{ts,tsx}'],
    languageOptions: { globals: { ...globals.browser } },
  },
  prettier,
);
