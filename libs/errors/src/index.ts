export * from './kiln.errors';
export * from './abort-reason';
