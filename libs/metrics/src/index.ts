export * from './kiln.metrics';
export * from './metrics.module';
