export * from './storage.driver';
export * from './storage.errors';
export * from './storage.keys';
export * from './local.storage-driver';
export * from './minio.storage-driver';
export * from './storage.module';
export * from './sweep-objects';
export * from './shared-volume.check';
