export * from './session-token';
export * from './sessions.service';
export * from './sessions.module';
