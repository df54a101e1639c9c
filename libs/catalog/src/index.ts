export * from './catalog.service';
export * from './catalog.module';
