export * from './batch-request';
export * from './batch-object';
export * from './batch-view';
export * from './content-policy';
export * from './fan-out';
export * from './batches.service';
export * from './batches.module';
