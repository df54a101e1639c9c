export * from './password';
export * from './accounts.service';
export * from './accounts.module';
export * from './plan-limits';
