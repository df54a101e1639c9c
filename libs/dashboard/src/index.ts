export * from './session-token';
export * from './ledger-cursor';
export * from './sessions.service';
export * from './usage.service';
export * from './dashboard.module';
