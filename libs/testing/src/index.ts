export * from './test-app';
export * from './harness';
export * from './sql-recorder';
export * from './fakes';
