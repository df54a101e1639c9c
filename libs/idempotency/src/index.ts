export * from './idempotency';
