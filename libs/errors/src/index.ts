export * from './kiln.errors';
