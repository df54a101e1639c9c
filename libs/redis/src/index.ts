export * from './redis.module';
export * from './redis-script';
export * from './redis-deadline';
