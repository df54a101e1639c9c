export * from './image-type';
export * from './upload.limits';
export * from './upload.names';
export * from './uploads.errors';
export * from './uploads.service';
export * from './uploads.module';
