import sharp from 'sharp';
import { EgressError, EgressPolicy, egressRequest, EgressResponse, formatBytes, isEgressError } from '@app/egress';
import type { UpstreamErrorClassifier } from './provider-type';
import { ProviderError, RenderResult, UpstreamRateHeaders } from './render.types';
import { sniffImageType } from './provider.utils';

/**
 * What every upstream type shares about talking HTTP through libs/egress: turning egress
 * failures into ProviderErrors, downloading result URLs, checking that bytes are an image.
 * A type's own folder holds only what differs (request shape, answer shape, refusals).
 */

const UPSTREAM_MESSAGE_MAX = 200;

/** Room for the JSON around a base64 image in an upstream answer. */
export const JSON_ENVELOPE_BYTES = 1024 * 1024;

/**
 * The egress policies of a route: its own API (http and private addresses only when the
 * operator allows them), and result URLs (never private, except on the API's own origin
 * when private addresses are allowed, which is how fakes and self-hosted upstreams serve them).
 */
export function upstreamPolicies(baseUrl: string, allowPrivate: boolean): { api: EgressPolicy; download: EgressPolicy } {
  return {
    api: { allowPrivate, allowSetting: 'UPSTREAM_ALLOW_PRIVATE' },
    download: { allowPrivate: false, trustedOrigins: allowPrivate ? [originOf(baseUrl)] : [] },
  };
}

/**
 * Runs one egress exchange, turning its failures into ProviderErrors. A caller abort
 * rejects with the caller's own reason, so the generator recognises its abort.
 */
export async function exchange(
  what: 'api' | 'image',
  limits: { timeoutMs: number; maxImageBytes: number },
  callerSignal: AbortSignal | undefined,
  work: () => Promise<EgressResponse>,
): Promise<EgressResponse> {
  try {
    return await work();
  } catch (err) {
    if (callerSignal?.aborted) throw callerSignal.reason;
    if (!isEgressError(err)) throw err;
    throw what === 'api' ? apiFailure(err, limits.timeoutMs) : imageUrlFailure(err, limits.maxImageBytes);
  }
}

function apiFailure(err: EgressError, timeoutMs: number): ProviderError {
  switch (err.reason) {
    case 'timeout':
      return new ProviderError('timeout', `The image provider did not answer within ${formatSeconds(timeoutMs)}`);
    case 'network':
    case 'unresolvable':
      return new ProviderError('upstream_error', `Could not reach the image provider${err.detail.code ? ` (${err.detail.code})` : ''}`, {
        retryable: true,
      });
    case 'redirect':
      return new ProviderError('invalid_response', `The image provider answered with a redirect, which is not followed (${err.message})`);
    case 'too_large':
      return new ProviderError('invalid_response', `The image provider's answer is too large (${err.message})`);
    default:
      // forbidden_address, not_https, bad_url: the route's own address is refused.
      return new ProviderError('not_configured', `The image provider's address is refused: ${err.message}`);
  }
}

/** A refused or failed result URL: a non-retryable failure unless it is plain network trouble. */
function imageUrlFailure(err: EgressError, maxImageBytes: number): ProviderError {
  switch (err.reason) {
    case 'timeout':
      return new ProviderError('timeout', `Downloading the generated image timed out (${err.message})`);
    case 'network':
      return new ProviderError(
        'upstream_error',
        `Could not download the generated image${err.detail.code ? ` (${err.detail.code})` : ''}`,
        {
          retryable: true,
        },
      );
    case 'too_large':
      return new ProviderError('invalid_response', `The generated image is larger than ${formatBytes(maxImageBytes)}`);
    case 'unexpected_content_type':
      return new ProviderError('invalid_response', `The image URL the provider returned does not serve an image (${err.message})`);
    default:
      // bad_url, not_https, forbidden_address, redirect, unresolvable: nothing is fetched.
      return new ProviderError('invalid_response', `The image provider returned an image URL that is refused: ${err.message}`, {
        retryable: false,
      });
  }
}

/** What an image URL may serve: an image type, or the generic binary types object stores use. */
function servesImage(contentType: string | undefined): boolean {
  return !contentType || /^image\//i.test(contentType) || /^(application|binary)\/octet-stream\b/i.test(contentType);
}

/**
 * No Authorization header: the URL usually points at a CDN, which must never see the key.
 * Only through the egress checks: a URL is whatever the upstream says, and its bytes end
 * up at a public URL.
 */
export async function downloadImage(
  url: string,
  opts: { policy: EgressPolicy; timeoutMs: number; maxImageBytes: number; signal: AbortSignal | undefined },
): Promise<Buffer> {
  if (url.startsWith('data:')) return decodeDataUrl(url);
  const res = await exchange('image', opts, opts.signal, () =>
    egressRequest(url, {
      policy: opts.policy,
      maxBytes: opts.maxImageBytes,
      timeoutMs: opts.timeoutMs,
      signal: opts.signal,
      acceptContentType: servesImage,
    }),
  );
  if (res.status < 200 || res.status >= 300) {
    const retryable = res.status === 429 || res.status >= 500;
    throw new ProviderError(retryable ? 'upstream_error' : 'invalid_response', `Downloading the generated image failed (${res.status})`, {
      retryable,
      status: res.status,
    });
  }
  return res.body;
}

/** data: URLs carry the image inline (some compatible servers answer so); no network involved. */
async function decodeDataUrl(url: string): Promise<Buffer> {
  try {
    return Buffer.from(await (await fetch(url)).arrayBuffer());
  } catch {
    throw new ProviderError('invalid_response', 'The image provider returned an unreadable data: URL');
  }
}

/** Bytes an upstream called an image, checked: size cap, real PNG/JPEG/WebP, readable dimensions. */
export async function checkedImage(data: Buffer, maxImageBytes: number): Promise<RenderResult> {
  if (data.length > maxImageBytes) {
    throw new ProviderError('invalid_response', `The generated image is larger than ${formatBytes(maxImageBytes)}`);
  }
  const contentType = sniffImageType(data);
  if (!contentType) {
    throw new ProviderError('invalid_response', 'The image provider returned data that is not a PNG, JPEG or WebP image');
  }
  const { width, height } = await sharp(data)
    .metadata()
    .catch(() => ({ width: undefined, height: undefined }));
  if (!width || !height) throw new ProviderError('invalid_response', 'The image provider returned an unreadable image');
  return { data, contentType, width, height };
}

export function originOf(baseUrl: string): string {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return 'null'; // no origin: the exchange itself refuses the URL
  }
}

/** What a synchronous upstream needs to POST one render and read its answer. */
export interface ImagePost {
  url: string;
  policy: EgressPolicy;
  headers: Record<string, string>;
  body: Buffer;
  config: { apiKey: string; timeoutMs: number; maxImageBytes: number };
  signal: AbortSignal | undefined;
  /** The type's reading of a non-2xx answer (a refusal, a rate limit, a rejection...). */
  classify: UpstreamErrorClassifier;
}

/**
 * POSTs a render to a synchronous upstream whose answer carries the image in base64 (so the
 * body may be 4/3 of the image cap plus a JSON envelope) and answers the body's text with the
 * answer's headers (rate-limit headers are read from them); a non-2xx answer is thrown as the
 * type classifies it.
 */
export async function postForImagePayload(post: ImagePost): Promise<{ payload: string; headers: Headers }> {
  const { config } = post;
  const res = await exchange('api', config, post.signal, () =>
    egressRequest(post.url, {
      policy: post.policy,
      method: 'POST',
      headers: post.headers,
      body: post.body,
      maxBytes: Math.ceil((config.maxImageBytes * 4) / 3) + JSON_ENVELOPE_BYTES,
      timeoutMs: config.timeoutMs,
      signal: post.signal,
    }),
  );
  const payload = res.body.toString('utf8');
  const headers = headersOf(res);
  if (res.status < 200 || res.status >= 300) {
    throw post.classify({ status: res.status, headers, text: payload }, { apiKey: config.apiKey });
  }
  return { payload, headers };
}

export function headersOf(res: EgressResponse): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (typeof value === 'string') headers.set(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  return headers;
}

/** Retry-After in seconds or as an HTTP date; OpenAI's retry-after-ms is preferred when present. */
export function parseRetryAfter(headers: Headers, now: number = Date.now()): number | undefined {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && /^\d+(\.\d+)?$/.test(ms.trim())) return Math.round(Number(ms));
  const value = headers.get('retry-after')?.trim();
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  const date = Date.parse(value);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}

/**
 * OpenAI's request budget headers (x-ratelimit-remaining-requests, -limit-requests,
 * -reset-requests, the reset a duration such as "1s", "6m0s" or "250ms"); undefined when the
 * answer carries none of them. Token budgets (-tokens) are not paced: images are counted in requests.
 */
export function parseRateHeaders(headers: Headers): UpstreamRateHeaders | undefined {
  const count = (name: string): number | undefined => {
    const v = headers.get(name)?.trim();
    return v && /^\d+$/.test(v) ? Number(v) : undefined;
  };
  const remaining = count('x-ratelimit-remaining-requests');
  const limit = count('x-ratelimit-limit-requests');
  const reset = headers.get('x-ratelimit-reset-requests');
  const resetMs = reset ? parseDurationMs(reset.trim()) : undefined;
  if (remaining === undefined && limit === undefined && resetMs === undefined) return undefined;
  return { remaining, limit, resetMs };
}

/** "1h2m3.5s", "20ms", "6m0s", or bare seconds ("2"): Go-style durations as OpenAI sends them. */
export function parseDurationMs(value: string): number | undefined {
  if (/^\d+(\.\d+)?$/.test(value)) return Math.round(Number(value) * 1000);
  const unit: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1000, ms: 1 };
  let total = 0;
  let rest = value;
  while (rest.length > 0) {
    const m = /^(\d+(?:\.\d+)?)(ms|h|m|s)/.exec(rest);
    if (!m) return undefined;
    total += Number(m[1]) * unit[m[2]];
    rest = rest.slice(m[0].length);
  }
  return value.length > 0 ? Math.round(total) : undefined;
}

/** An upstream's message made safe to show: one line, short, the key scrubbed. */
export function safeUpstreamMessage(message: string, apiKey: string): string {
  let safe = apiKey ? message.split(apiKey).join('[redacted]') : message;
  safe = safe.replace(/\s+/g, ' ').trim();
  if (safe.length > UPSTREAM_MESSAGE_MAX) safe = `${safe.slice(0, UPSTREAM_MESSAGE_MAX - 1)}…`;
  return safe;
}

export function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
