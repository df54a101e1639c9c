import type { MigrationInterface } from 'typeorm';
import { InitialSchema1763888400000 } from './1763888400000-initial-schema';
import { SeedPlansAndModels1763888400001 } from './1763888400001-seed-plans-and-models';
import { TasksPendingFairIndex1763888400002 } from './1763888400002-tasks-pending-fair-index';
import { UploadsCreatedAtIndex1763888400003 } from './1763888400003-uploads-created-at-index';
import { RetentionIndexes1763888400004 } from './1763888400004-retention-indexes';
import { AccountsCreatedAtMilliseconds1763888400005 } from './1763888400005-accounts-created-at-milliseconds';
import { ResultTokens1763888400010 } from './1763888400010-result-tokens';
import { TaskDetailsAndIdempotencyKeys1763888400030 } from './1763888400030-task-details-and-idempotency-keys';
import { CancelAndBatchVersions1763888400031 } from './1763888400031-cancel-and-batch-versions';
import { Webhooks1763888400140 } from './1763888400140-webhooks';
import { ContentPolicyTerms1763888400150 } from './1763888400150-content-policy-terms';
import { UpstreamRequests1763888400160 } from './1763888400160-upstream-requests';
import { WebhookCircuits1763888400170 } from './1763888400170-webhook-circuits';
import { BatchSeedAndOutputFormat1763888400180 } from './1763888400180-batch-seed-and-output-format';
import { UpstreamCost1763888400240 } from './1763888400240-upstream-cost';
import { EconomyTier1763888400250 } from './1763888400250-economy-tier';
import { UpstreamBatches1763888400260 } from './1763888400260-upstream-batches';
import { UnpricedCost1763888400270 } from './1763888400270-unpriced-cost';
import { ModelOwnPairs1763888400280 } from './1763888400280-model-own-pairs';
import { UpstreamCancels1763888400290 } from './1763888400290-upstream-cancels';
import { ModelOpenAiAliases1763888400300 } from './1763888400300-model-openai-aliases';
import { WebhookEndpointDue1763888400310 } from './1763888400310-webhook-endpoint-due';
import { CreditPurchases1763888400320 } from './1763888400320-credit-purchases';
import { BatchDeadlines1763888400330 } from './1763888400330-batch-deadlines';
import { KeyBudgets1763888400340 } from './1763888400340-key-budgets';
import { LowCreditsThreshold1763888400341 } from './1763888400341-low-credits-threshold';
import { RouteChains1763888400350 } from './1763888400350-route-chains';
import { SubmitIntents1763888400360 } from './1763888400360-submit-intents';
import { BatchSearch1763888400370 } from './1763888400370-batch-search';

export { SEEDED_BLOCKED_TERMS } from './1763888400150-content-policy-terms';

/** Every migration, in order. A new migration is added here as well as written. */
export const ALL_MIGRATIONS: (new () => MigrationInterface)[] = [
  InitialSchema1763888400000,
  SeedPlansAndModels1763888400001,
  TasksPendingFairIndex1763888400002,
  UploadsCreatedAtIndex1763888400003,
  RetentionIndexes1763888400004,
  AccountsCreatedAtMilliseconds1763888400005,
  ResultTokens1763888400010,
  TaskDetailsAndIdempotencyKeys1763888400030,
  CancelAndBatchVersions1763888400031,
  Webhooks1763888400140,
  ContentPolicyTerms1763888400150,
  UpstreamRequests1763888400160,
  WebhookCircuits1763888400170,
  BatchSeedAndOutputFormat1763888400180,
  UpstreamCost1763888400240,
  EconomyTier1763888400250,
  UpstreamBatches1763888400260,
  UnpricedCost1763888400270,
  ModelOwnPairs1763888400280,
  UpstreamCancels1763888400290,
  ModelOpenAiAliases1763888400300,
  WebhookEndpointDue1763888400310,
  CreditPurchases1763888400320,
  BatchDeadlines1763888400330,
  KeyBudgets1763888400340,
  LowCreditsThreshold1763888400341,
  RouteChains1763888400350,
  SubmitIntents1763888400360,
  BatchSearch1763888400370,
];
