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
export type CreatedBatch = Schemas['CreatedBatchResponseDto'];
export type Batch = Schemas['BatchDto'];
export type Task = Schemas['TaskDto'];
export type BatchDetail = Schemas['BatchDetailResponseDto'];
export type BatchPage = Schemas['BatchListResponseDto'];
export type UploadResult = Schemas['UploadResponseDto'];
export type ErrorBody = Schemas['ErrorResponseDto'];

/** `POST /v1/batches/estimate`: what a create would cost and whether it would go through now. */
export interface Estimate {
  total: number;
  creditCost: number;
  creditsRequired: number;
  balance: number;
  dailyCap: { cap: number; used: number; remaining: number; resetsAt: number } | null;
  wouldCreate: boolean;
  refusal: ErrorBody | null;
}

export type WebhookEventType = 'batch.completed' | 'task.succeeded' | 'task.failed' | 'ping';

export interface WebhookEndpoint {
  id: string;
  url: string;
  events: WebhookEventType[];
  description: string | null;
  createdAt: number;
  disabledAt: number | null;
}

export interface CreateWebhookRequest {
  url: string;
  events?: WebhookEventType[];
  description?: string;
}

export interface CreatedWebhook {
  endpoint: WebhookEndpoint;
  /** `whsec_...`: shown only once. */
  secret: string;
}

export interface WebhookDelivery {
  id: string;
  type: WebhookEventType;
  attempts: number;
  status: 'pending' | 'delivered' | 'failed';
  lastStatusCode: number | null;
  lastError: string | null;
  nextAttemptAt: number | null;
  deliveredAt: number | null;
}

/** A delivery's body, as `Kiln.verifyWebhook` returns it once the signature checks out. */
export interface WebhookEvent<T = unknown> {
  id: string;
  type: WebhookEventType;
  createdAt: number;
  data: T;
}
