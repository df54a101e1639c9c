export * from './billing.service';
export * from './billing.module';
export * from './usage.service';
export * from './ledger-cursor';
export * from './operator-usage.service';
export * from './key-budget';
