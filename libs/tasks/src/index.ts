export * from './task-queue.contract';
export * from './task-queue.module';
export * from './batch-status';
export * from './group-writes';
export * from './task-rows';
export * from './task-dispatch.service';
export * from './task-state.store';
export * from './tasks.module';
