export * from './uploads.service';
export * from './uploads.module';
