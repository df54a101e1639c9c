export * from './catalog.service';
export * from './catalog.module';
export * from './route-health.store';
export * from './economy';
export * from './openai-aliases';
export * from './price-warnings';
