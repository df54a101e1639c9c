export * from './test-app';
export * from './harness';
