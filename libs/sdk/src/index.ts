export { Kiln, SDK_VERSION } from './client';
export type { KilnOptions, UploadInput } from './client';
export { resultFileName } from './batches';
export type { DownloadedFile, DownloadOptions, WaitOptions } from './batches';
export { KilnApiError, KilnConnectionError, KilnWebhookVerificationError } from './errors';
export { verifyWebhook, WEBHOOK_TOLERANCE_SECONDS } from './webhooks';
export type { WebhookHeaders } from './webhooks';
export type * from './types';
export type { components, operations, paths } from './openapi.generated';
