/**
 * The contract between the generator and whatever renders an image. Providers are pure:
 * no database, no queue, no configuration reads; everything they need arrives here.
 */

import type { Resolution } from '@app/geometry';
import type { TokenUsage } from './price-rule';

export type RenderResolution = Resolution;

export type RenderQuality = 'auto' | 'low' | 'medium' | 'high';

export interface ReferenceImage {
  data: Buffer;
  contentType: string;
}

export interface RenderRequest {
  prompt: string;
  seed: number;
  /** Exact pixel size Kiln expects (see pixelSize); providers that cannot honour it say what they produced. */
  width: number;
  height: number;
  resolution: RenderResolution;
  aspectRatio: string;
  /** null: the model does not support a quality setting. */
  quality: RenderQuality | null;
  /** 'transparent' | '#RRGGBB' | null. null means "auto", and also "the model does not support it". */
  background: string | null;
  references: ReferenceImage[];
  /** The format the batch wants; a provider that cannot make it returns another and the generator converts. Default png. */
  outputFormat?: RenderFormat;
  /** Aborting rejects the render with the signal's own reason, so the caller recognises its abort. */
  signal?: AbortSignal;
  /** Coarse progress in percent (0-100), only ever increasing. */
  onProgress?: (pct: number) => void;
}

export type RenderContentType = 'image/png' | 'image/jpeg' | 'image/webp';
export type RenderFormat = 'png' | 'jpeg' | 'webp';
export const CONTENT_TYPE_OF: Record<RenderFormat, RenderContentType> = { png: 'image/png', jpeg: 'image/jpeg', webp: 'image/webp' };

/**
 * What an upstream's answer said about its request budget (OpenAI's x-ratelimit-*-requests
 * headers): the generator's route pacing spends no more than `remaining` until `resetMs` passes.
 */
export interface UpstreamRateHeaders {
  /** Requests left in the current window, counting this one. */
  remaining?: number;
  /** Requests the window allows in all. */
  limit?: number;
  /** Until the window is full again, in ms from the answer. */
  resetMs?: number;
}

export interface RenderResult {
  data: Buffer;
  contentType: RenderContentType;
  /** What was actually produced, which may differ from what was asked (simulated, mapped sizes). */
  width: number;
  height: number;
  /** The upstream's rate-limit headers on this answer, when it sent any. */
  rateHeaders?: UpstreamRateHeaders;
  /** The tokens the upstream's answer reported (OpenAI's `usage`, Gemini's `usageMetadata`): its price, where the route's rule has token prices. */
  usage?: TokenUsage;
  /** The run time the upstream reported, in seconds (Replicate's `metrics.predict_time`), for routes billed per second. */
  runSeconds?: number;
}

export interface ImageProvider {
  render(req: RenderRequest): Promise<RenderResult>;
}

/**
 * not_configured: the route lacks its key or usable settings (an operator must fix it; the request is not at fault).
 * content_refused: the upstream's content policy refused this request or its image (each type's error
 * classification says which answers are refusals); asking again would be refused again.
 */
export type ProviderErrorKind =
  'rate_limited' | 'upstream_error' | 'timeout' | 'bad_request' | 'content_refused' | 'invalid_response' | 'not_configured';

/** Whether a kind is worth retrying when the thrower does not say otherwise. */
const RETRYABLE_BY_DEFAULT: Record<ProviderErrorKind, boolean> = {
  rate_limited: true,
  upstream_error: true,
  timeout: true,
  bad_request: false,
  content_refused: false,
  invalid_response: false,
  not_configured: false,
};

export interface ProviderErrorOptions {
  retryable?: boolean;
  retryAfterMs?: number;
  /** Upstream HTTP status, when there was one. */
  status?: number;
  /** Upstream machine-readable code (e.g. OpenAI's error.code), so callers can map content refusals. */
  upstreamCode?: string;
  /** The upstream's rate-limit headers on this answer, when it sent any. */
  rateHeaders?: UpstreamRateHeaders;
}

/**
 * A render failure the generator can act on. The message is short and safe to show to the
 * account holder: it never carries a stack trace, a request body or an upstream credential.
 */
export class ProviderError extends Error {
  readonly kind: ProviderErrorKind;
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly status?: number;
  readonly upstreamCode?: string;
  readonly rateHeaders?: UpstreamRateHeaders;

  constructor(kind: ProviderErrorKind, message: string, options: ProviderErrorOptions = {}) {
    super(message);
    this.name = 'ProviderError';
    this.kind = kind;
    this.retryable = options.retryable ?? RETRYABLE_BY_DEFAULT[kind];
    if (options.retryAfterMs !== undefined) this.retryAfterMs = options.retryAfterMs;
    if (options.status !== undefined) this.status = options.status;
    if (options.upstreamCode !== undefined) this.upstreamCode = options.upstreamCode;
    if (options.rateHeaders !== undefined) this.rateHeaders = options.rateHeaders;
  }
}

export function isProviderError(err: unknown): err is ProviderError {
  return err instanceof ProviderError;
}

/** Most concurrent upstream calls a route may allow per model. */
export const MAX_ROUTE_CONCURRENCY = 10_000;
