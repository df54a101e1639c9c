import type { ImageProvider, ProviderError, RenderRequest, RenderResult } from '../provider.types';

/**
 * What a queue upstream (fal, Replicate, BFL) accepted: its id for the request and what
 * polling it needs. Kiln records it before waiting, so a crash, a redelivery or a retry after
 * Kiln's own trouble resumes the request instead of paying for it twice.
 */
export interface UpstreamSubmission {
  requestId: string;
  /** Plain strings only (stored as JSON on the task): status and result URLs, and the like. */
  handle: Record<string, string>;
}

/** One poll's answer. */
export type UpstreamPoll =
  /** Still queued or in progress, or the poll itself met passing trouble (429, 5xx, a timeout). */
  | { state: 'waiting'; retryAfterMs?: number }
  /** Made: the image is at imageUrl (fetched through the egress checks, without the key). */
  | { state: 'done'; imageUrl: string }
  /**
   * The upstream's own failure answer. Retryable: a new attempt submits anew. Not retryable
   * (a content refusal, a request the upstream refuses): the task fails for good.
   */
  | { state: 'failed'; error: ProviderError };

/**
 * A route type whose upstream answers a submit with a request id and makes the image later:
 * the generator submits within the model's slot, records the submission, and frees its
 * worker; a poller polls each request at `pollIntervalMs` and, once made, the image is
 * fetched within the model's slot again. Providers stay pure: no database, no clock of
 * their own beyond their timeouts. `render` does all of it in one call (submit, poll, fetch)
 * for callers that hold nothing while they wait.
 */
export interface QueueImageProvider extends ImageProvider {
  readonly queue: true;
  /** Between two polls of one request. */
  readonly pollIntervalMs: number;
  /** How long a request may wait upstream before the task fails (never resubmitted: it may still be billed). */
  readonly maxWaitMs: number;
  submit(req: RenderRequest): Promise<UpstreamSubmission>;
  poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll>;
  /** The made image, checked (a PNG, JPEG or WebP within the size cap); width and height as it really is. */
  fetchImage(imageUrl: string, signal?: AbortSignal): Promise<RenderResult>;
}

export function isQueueProvider(provider: unknown): provider is QueueImageProvider {
  return typeof provider === 'object' && provider !== null && (provider as { queue?: unknown }).queue === true;
}

/** Poll interval and longest wait when a route does not set them. */
export const DEFAULT_POLL_INTERVAL_MS = 1000;
export const DEFAULT_MAX_WAIT_MS = 30 * 60_000;
