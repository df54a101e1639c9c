export * from './env.schema';
export * from './kiln.config';
export * from './config.module';
