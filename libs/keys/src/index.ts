export * from './key-secret';
export * from './key-scopes';
export * from './keys.service';
export * from './keys.module';
