import type { components } from './openapi.generated';

/*
 * The SDK's names for the wire shapes. Each is an alias of a type generated from the OpenAPI
 * document the api serves (openapi.generated.ts), so the SDK cannot drift from the server: a
 * changed DTO changes these, and code using a field that went away stops compiling.
 */
type Schemas = components['schemas'];

export type Catalog = Schemas['CatalogResponseDto'];
export type Model = Schemas['ModelDto'];
export type Me = Schemas['MeResponseDto'];
export type CreateBatchRequest = Schemas['CreateBatchRequestDto'];
/** `standard` (the default) or `economy`: the model's economy price, every image within its economyWindowHours. */
export type BatchTier = NonNullable<CreateBatchRequest['tier']>;
/** `1K`, `2K` or `4K`: the size tier a model prices (its legal pairs with each aspect ratio are in the catalog). */
export type BatchResolution = NonNullable<CreateBatchRequest['resolution']>;
export type CreatedBatch = Schemas['CreatedBatchResponseDto'];
export type Batch = Schemas['BatchDto'];
export type Task = Schemas['TaskDto'];
export type BatchDetail = Schemas['BatchDetailResponseDto'];
export type BatchPage = Schemas['BatchListResponseDto'];
export type UploadResult = Schemas['UploadResponseDto'];
export type ErrorBody = Schemas['ErrorResponseDto'];

/** `POST /v1/batches/estimate`: what a create would cost and whether it would go through now. */
export type Estimate = Schemas['BatchEstimateResponseDto'];

export type WebhookEndpoint = Schemas['WebhookEndpointDto'];
export type WebhookEventType = WebhookEndpoint['events'][number];
export type CreateWebhookRequest = Schemas['CreateWebhookRequestDto'];
/** `secret` (`whsec_...`) is shown only once. */
export type CreatedWebhook = Schemas['CreatedWebhookResponseDto'];
export type WebhookDelivery = Schemas['WebhookDeliveryDto'];

/** An API key as its holder sees it (`kiln.keys`): budget with its period's spend, models allowlist. */
export type ApiKey = Schemas['KeyDto'];
/** `{ credits, period, spent, resetsAt }`: the key's budget and what its current UTC period spent. */
export type KeyBudget = Schemas['KeyBudgetDto'];
/** `'day'`, `'week'` (ISO, from Monday 00:00 UTC) or `'month'`. */
export type BudgetPeriod = Schemas['KeyBudgetRequestDto']['period'];
export type CreateKeyRequest = Schemas['DashboardCreateKeyRequestDto'];
export type UpdateKeyRequest = Schemas['UpdateKeyRequestDto'];
/** `secret` (`kiln_live_...`) is shown only once. */
export type CreatedKey = Schemas['CreatedKeyResponseDto'];
/** A dashboard session: `token` (`kiln_sess_...`) and `expiresAt` (Unix ms). */
export type Session = Schemas['SessionResponseDto'];

/** A delivery's body, as `Kiln.verifyWebhook` returns it once the signature checks out. */
export interface WebhookEvent<T = unknown> {
  id: string;
  type: WebhookEventType;
  createdAt: number;
  data: T;
}
