export { Kiln, SDK_VERSION } from './client';
export type { KilnOptions, UploadInput } from './client';
export { resultFileName } from './batches';
export type { DownloadedFile, DownloadOptions, WaitOptions } from './batches';
export { SseParser } from './events';
export type { BatchEvent, EventsOptions, SseMessage } from './events';
export { KilnApiError, KilnConnectionError, KilnWebhookVerificationError } from './errors';
export { verifyWebhook, WEBHOOK_TOLERANCE_SECONDS } from './webhooks';
export type { WebhookHeaders } from './webhooks';
export type * from './types';
// The wire schemas. The package's build keeps of them only what the types above reach
// (libs/sdk/build.js); inside this repository the generated file is whole.
export type { components } from './openapi.generated';
