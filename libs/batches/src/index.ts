export * from './queue.contract';
export * from './queue.module';
