// Three projects: unit specs beside the code, e2e specs under test/ against real
// PostgreSQL and Redis, and the web app in a browser (test/browser). globalSetup gives the whole run its own database and Redis prefix.
const { pathsToModuleNameMapper } = require('ts-jest');
const { compilerOptions } = require('./tsconfig.json');

const moduleNameMapper = pathsToModuleNameMapper(compilerOptions.paths, { prefix: '<rootDir>/' });
// Each file is transpiled on its own (fast; `npm test` type-checks code and tests first with
// `npm run typecheck`): tsconfig.spec.json turns isolatedModules on for ts-jest.
const transform = { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.spec.json' }] };

module.exports = {
  globalSetup: '<rootDir>/test/setup/global-setup.js',
  globalTeardown: '<rootDir>/test/setup/global-teardown.js',
  projects: [
    {
      displayName: 'unit',
      rootDir: __dirname,
      testMatch: ['<rootDir>/libs/**/*.spec.ts', '<rootDir>/apps/**/*.spec.ts'],
      moduleFileExtensions: ['ts', 'js', 'json'],
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      setupFilesAfterEnv: ['<rootDir>/test/setup/unit-timeout.js'],
    },
    {
      displayName: 'e2e',
      rootDir: __dirname,
      testMatch: ['<rootDir>/test/**/*.e2e-spec.ts'],
      moduleFileExtensions: ['ts', 'js', 'json'],
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      // testTimeout is not a per-project option; a setup file raises it for the e2e project.
      setupFilesAfterEnv: ['<rootDir>/test/setup/e2e-timeout.js'],
    },
    {
      // The web app in Debian's Chromium (docs/web.md#tests): needs dist/web (npm run build)
      // and /usr/bin/chromium (scripts/test-browser.sh installs it).
      displayName: 'browser',
      rootDir: __dirname,
      testMatch: ['<rootDir>/test/browser/**/*.browser-spec.ts'],
      moduleFileExtensions: ['ts', 'js', 'json'],
      testEnvironment: 'node',
      transform,
      moduleNameMapper,
      setupFilesAfterEnv: ['<rootDir>/test/setup/browser-timeout.js'],
    },
  ],
};
