export * from './env.schema';
export * from './kiln.config';
export * from './config.module';
export * from './cpus';
export * from './boot-logger';
export * from './lookalike-variables';
export * from './runtime-env';
