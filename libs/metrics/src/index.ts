export * from './kiln.metrics';
export * from './metrics.module';
export * from './stage-timeline';
