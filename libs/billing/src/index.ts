export * from './billing.service';
export * from './billing.module';
