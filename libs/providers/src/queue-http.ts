import type { UpstreamAnswer } from './provider-type';
import { EgressPolicy, egressRequest } from '@app/egress';
import { ProviderError, ReferenceImage, RenderResult } from './render.types';
import {
  checkedImage,
  downloadImage,
  exchange,
  headersOf,
  originOf,
  parseRetryAfter,
  safeUpstreamMessage,
  upstreamPolicies,
} from './upstream-http';

/** What every queue type's HTTP needs from its route and the configuration. */
export interface UpstreamHttpConfig {
  /** The upstream's name as messages show it (each queue type's own). */
  label: string;
  baseUrl: string;
  apiKey: string;
  timeoutMs: number;
  /** UPSTREAM_ALLOW_PRIVATE: plain http and private addresses for the API, and image URLs on its own origin only. */
  allowPrivate: boolean;
  maxImageBytes: number;
}

/** An answer of a queue upstream: what a type's error classification sees, plus the body as JSON. */
export interface ParsedUpstreamAnswer extends UpstreamAnswer {
  /** The body parsed as JSON, or undefined when it is not JSON. */
  json: unknown;
}

/** A JSON answer about a request is small; a larger one is not what was asked for. */
const MAX_ANSWER_BYTES = 1024 * 1024;
/** A poll is a small GET: it gets less time than a submit may. */
const MAX_POLL_TIMEOUT_MS = 30_000;

/**
 * The HTTP every queue type shares, all through libs/egress: JSON calls to the route's API
 * (its key only ever sent to the base URL's own origin, or a host the type vouches for),
 * upstream errors as ProviderErrors (429 with its Retry-After, 5xx and timeouts retryable,
 * other 4xx not, a content refusal as content_refused), and the made image fetched without
 * the key, through the public-address checks, within the size cap, and checked to be one.
 */
export class UpstreamHttp {
  readonly baseUrl: string;
  private readonly apiPolicy: EgressPolicy;
  private readonly downloadPolicy: EgressPolicy;

  constructor(private readonly config: UpstreamHttpConfig) {
    this.baseUrl = config.baseUrl.replace(/\/+$/, '');
    const policies = upstreamPolicies(this.baseUrl, config.allowPrivate);
    this.apiPolicy = policies.api;
    this.downloadPolicy = policies.download;
  }

  get label(): string {
    return this.config.label;
  }

  /** One call to the API; egress failures become ProviderErrors (a caller abort rejects with its reason). */
  async call(
    method: 'GET' | 'POST' | 'PUT',
    url: string,
    headers: Record<string, string>,
    body?: unknown,
    options: { signal?: AbortSignal; poll?: boolean } = {},
  ): Promise<ParsedUpstreamAnswer> {
    const timeoutMs = options.poll ? Math.min(this.config.timeoutMs, MAX_POLL_TIMEOUT_MS) : this.config.timeoutMs;
    const res = await exchange('api', { timeoutMs, maxImageBytes: this.config.maxImageBytes }, options.signal, () =>
      egressRequest(url, {
        policy: this.apiPolicy,
        method,
        headers: body === undefined ? headers : { ...headers, 'content-type': 'application/json' },
        body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
        maxBytes: MAX_ANSWER_BYTES,
        timeoutMs,
        signal: options.signal,
        // Polls come back to the same host every interval, thousands of requests at once:
        // reusing connections (pooled by checked address) saves a handshake per poll.
        keepAlive: true,
      }),
    );
    const text = res.body.toString('utf8');
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: res.status, headers: headersOf(res), text, json };
  }

  /**
   * A non-2xx answer as a ProviderError. `refused` says whether the body is the upstream's
   * content refusal (each type knows its own words for it).
   */
  errorFor(answer: ParsedUpstreamAnswer, refused: (answer: ParsedUpstreamAnswer) => boolean = () => false): ProviderError {
    const { status } = answer;
    const detail = this.upstreamMessage(answer);
    const suffix = detail ? `: ${detail}` : '';
    if (refused(answer)) return new ProviderError('content_refused', `${this.label} refused the content (${status})${suffix}`, { status });
    if (status === 429) {
      return new ProviderError('rate_limited', `${this.label} rate limit reached (429)${suffix}`, {
        status,
        retryAfterMs: parseRetryAfter(answer.headers),
      });
    }
    if (status === 408) return new ProviderError('timeout', `${this.label} timed out (408)${suffix}`, { status });
    if (status >= 500) return new ProviderError('upstream_error', `${this.label} error (${status})${suffix}`, { status });
    if (status === 401 || status === 403) {
      return new ProviderError('not_configured', `${this.label} refused the route's key (${status})${suffix}`, { status });
    }
    return new ProviderError('bad_request', `${this.label} refused the request (${status})${suffix}`, { status });
  }

  /** The made image: no key sent, public addresses only (or the base URL's own origin when allowed), checked to be an image. */
  async image(url: string, signal?: AbortSignal): Promise<RenderResult> {
    const data = await downloadImage(url, {
      policy: this.downloadPolicy,
      timeoutMs: this.config.timeoutMs,
      maxImageBytes: this.config.maxImageBytes,
      signal,
    });
    return checkedImage(data, this.config.maxImageBytes);
  }

  /** A URL the upstream named for polling, kept only on the base URL's origin or a host the caller trusts; else the fallback. */
  sameOriginOr(candidate: unknown, fallback: string, alsoTrusted: (url: URL) => boolean = () => false): string {
    if (typeof candidate !== 'string') return fallback;
    try {
      const url = new URL(candidate);
      if (url.origin === originOf(this.baseUrl) || alsoTrusted(url)) return url.toString();
    } catch {
      // not a URL: the fallback
    }
    return fallback;
  }

  /** The upstream's message from a JSON error body (detail, error, message), else the text; one short line, key scrubbed. */
  upstreamMessage(answer: ParsedUpstreamAnswer): string {
    let message = answer.text;
    const body = answer.json as Record<string, unknown> | undefined;
    if (body && typeof body === 'object') {
      const candidates = [body.detail, body.error, body.message, body.title];
      for (const c of candidates) {
        if (typeof c === 'string' && c) {
          message = c;
          break;
        }
        if (Array.isArray(c) && c.length > 0) {
          const first = c[0] as { msg?: unknown; message?: unknown };
          const m = typeof first === 'string' ? first : (first?.msg ?? first?.message);
          if (typeof m === 'string') {
            message = m;
            break;
          }
        }
        if (c && typeof c === 'object' && typeof (c as { message?: unknown }).message === 'string') {
          message = (c as { message: string }).message;
          break;
        }
      }
    }
    return this.scrub(message);
  }

  scrub(message: string): string {
    return safeUpstreamMessage(message, this.config.apiKey);
  }
}

/** References as data URIs: every queue upstream takes them where it takes an image URL. */
export function dataUri(ref: ReferenceImage): string {
  return `data:${ref.contentType};base64,${ref.data.toString('base64')}`;
}

/** The JSON answer, or an invalid_response error naming what was missing. */
export function objectOf(answer: ParsedUpstreamAnswer, label: string): Record<string, unknown> {
  if (!answer.json || typeof answer.json !== 'object' || Array.isArray(answer.json)) {
    throw new ProviderError('invalid_response', `${label} answered with something other than a JSON object`);
  }
  return answer.json as Record<string, unknown>;
}
