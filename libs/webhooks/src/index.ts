export * from './delivery-log.sweep';
export * from './webhook-events';
export * from './webhook-secret';
export * from './webhook-outbox';
export * from './webhook-endpoints.service';
export * from './webhook-sender.service';
export * from './webhooks.module';
export * from './spend-alerts';
