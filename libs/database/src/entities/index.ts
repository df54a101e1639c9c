import { AccountEntity } from './account.entity';
import { ApiKeyEntity } from './api-key.entity';
import { BatchEntity } from './batch.entity';
import { CreditPackEntity } from './credit-pack.entity';
import { CreditPurchaseEntity } from './credit-purchase.entity';
import { IdempotencyKeyEntity } from './idempotency-key.entity';
import { LedgerEntryEntity } from './ledger-entry.entity';
import { ModelEntity } from './model.entity';
import { PlanEntity } from './plan.entity';
import { SessionEntity } from './session.entity';
import { TaskEntity } from './task.entity';
import { UploadEntity } from './upload.entity';
import { UpstreamBatchEntity } from './upstream-batch.entity';
import { WebhookDeliveryEntity } from './webhook-delivery.entity';
import { WebhookEndpointEntity } from './webhook-endpoint.entity';

export * from './account.entity';
export * from './api-key.entity';
export * from './batch.entity';
export * from './credit-pack.entity';
export * from './credit-purchase.entity';
export * from './idempotency-key.entity';
export * from './ledger-entry.entity';
export * from './model.entity';
export * from './plan.entity';
export * from './session.entity';
export * from './task.entity';
export * from './upload.entity';
export * from './upstream-batch.entity';
export * from './webhook-delivery.entity';
export * from './webhook-endpoint.entity';

export const ALL_ENTITIES = [
  PlanEntity,
  AccountEntity,
  ApiKeyEntity,
  SessionEntity,
  LedgerEntryEntity,
  ModelEntity,
  BatchEntity,
  TaskEntity,
  UploadEntity,
  WebhookEndpointEntity,
  WebhookDeliveryEntity,
  IdempotencyKeyEntity,
  UpstreamBatchEntity,
  CreditPackEntity,
  CreditPurchaseEntity,
];
