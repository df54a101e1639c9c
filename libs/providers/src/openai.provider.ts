import sharp from 'sharp';
import { EgressError, EgressPolicy, egressRequest, EgressResponse, formatBytes, isEgressError } from '@app/egress';
import { ImageProvider, ProviderError, RenderRequest, RenderResult } from './provider.types';
import { reportProgress, sniffImageType, throwIfAborted } from './provider.utils';

export interface OpenAiProviderConfig {
  /** e.g. https://api.openai.com/v1 (a trailing slash is tolerated). */
  baseUrl: string;
  apiKey: string;
  /** Upstream model name, e.g. gpt-image-1. */
  model: string;
  /** Kiln "WxH" -> upstream size string; sizes not listed are sent as "WxH". */
  sizeMap?: Record<string, string>;
  /** Budget for the upstream call, and again for downloading a returned URL. */
  timeoutMs: number;
  /**
   * The operator allows plain http and non-public addresses for the base URL
   * (UPSTREAM_ALLOW_PRIVATE), and then for result URLs on the base URL's own origin only.
   */
  allowPrivate: boolean;
  /** The largest image downloaded; the JSON answer may carry it base64-encoded (4/3 of it). */
  maxImageBytes: number;
}

const UPSTREAM_MESSAGE_MAX = 200;

/** Room for the JSON around a base64 image in an upstream answer. */
const JSON_ENVELOPE_BYTES = 1024 * 1024;

/** gpt-image models always answer in base64 and refuse a response_format parameter. */
const ALWAYS_BASE64_MODEL = /^gpt-image/i;

/** What an image URL may serve: an image type, or the generic binary types object stores use. */
function servesImage(contentType: string | undefined): boolean {
  return !contentType || /^image\//i.test(contentType) || /^(application|binary)\/octet-stream\b/i.test(contentType);
}

const EXTENSION_BY_TYPE: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
};

/**
 * Any OpenAI-compatible images endpoint: /images/generations without references,
 * /images/edits (multipart) with them. Failures become ProviderErrors the generator can
 * retry or not; their messages quote the upstream but never the key.
 *
 * The upstream's answers are not trusted: base64 is asked for and preferred, and a returned
 * URL is fetched only through the egress checks (https, public address, no redirect, size
 * cap), so an upstream cannot make Kiln fetch and publish an internal resource.
 */
export class OpenAiProvider implements ImageProvider {
  private readonly baseUrl: string;
  private readonly apiPolicy: EgressPolicy;
  private readonly downloadPolicy: EgressPolicy;

  constructor(private readonly config: OpenAiProviderConfig) {
    this.baseUrl = config.baseUrl.replace(/\/+$/, '');
    this.apiPolicy = { allowPrivate: config.allowPrivate, allowSetting: 'UPSTREAM_ALLOW_PRIVATE' };
    this.downloadPolicy = { allowPrivate: false, trustedOrigins: config.allowPrivate ? [originOf(this.baseUrl)] : [] };
  }

  async render(req: RenderRequest): Promise<RenderResult> {
    throwIfAborted(req.signal);
    const size = this.config.sizeMap?.[`${req.width}x${req.height}`] ?? `${req.width}x${req.height}`;
    // 'auto' is every upstream's default, and a '#RRGGBB' colour has no upstream equivalent.
    const quality = req.quality !== null && req.quality !== 'auto' ? req.quality : undefined;
    const background = req.background === 'transparent' ? 'transparent' : undefined;
    const headers: Record<string, string> = { authorization: `Bearer ${this.config.apiKey}` };

    // Where the upstream honours it, ask for the image itself rather than a URL to fetch.
    const responseFormat = ALWAYS_BASE64_MODEL.test(this.config.model) ? undefined : 'b64_json';
    let url: string;
    let body: Buffer;
    if (req.references.length === 0) {
      url = `${this.baseUrl}/images/generations`;
      headers['content-type'] = 'application/json';
      body = Buffer.from(
        JSON.stringify({ model: this.config.model, prompt: req.prompt, n: 1, size, quality, background, response_format: responseFormat }),
      );
    } else {
      url = `${this.baseUrl}/images/edits`;
      const form = new FormData();
      form.append('model', this.config.model);
      form.append('prompt', req.prompt);
      form.append('n', '1');
      form.append('size', size);
      if (quality) form.append('quality', quality);
      if (background) form.append('background', background);
      if (responseFormat) form.append('response_format', responseFormat);
      req.references.forEach((ref, i) => {
        const ext = EXTENSION_BY_TYPE[ref.contentType] ?? 'bin';
        form.append('image[]', new Blob([new Uint8Array(ref.data)], { type: ref.contentType }), `ref-${i}.${ext}`);
      });
      // Encoded here (boundary included) because the egress client sends bytes.
      const encoded = new Response(form);
      headers['content-type'] = encoded.headers.get('content-type')!;
      body = Buffer.from(await encoded.arrayBuffer());
    }

    const res = await this.exchange('api', req.signal, () =>
      egressRequest(url, {
        policy: this.apiPolicy,
        method: 'POST',
        headers,
        body,
        maxBytes: Math.ceil((this.config.maxImageBytes * 4) / 3) + JSON_ENVELOPE_BYTES,
        timeoutMs: this.config.timeoutMs,
        signal: req.signal,
      }),
    );
    const payload = res.body.toString('utf8');
    if (res.status < 200 || res.status >= 300) throw this.errorForStatus(res.status, headersOf(res), payload);
    reportProgress(req.onProgress, 60);

    const first = parseFirstImage(payload);
    const data = 'b64' in first ? Buffer.from(first.b64, 'base64') : await this.download(first.url, req.signal);
    if (data.length > this.config.maxImageBytes) {
      throw new ProviderError('invalid_response', `The generated image is larger than ${formatBytes(this.config.maxImageBytes)}`);
    }
    const contentType = sniffImageType(data);
    if (!contentType) {
      throw new ProviderError('invalid_response', 'The image provider returned data that is not a PNG, JPEG or WebP image');
    }
    const { width, height } = await sharp(data)
      .metadata()
      .catch(() => ({ width: undefined, height: undefined }));
    if (!width || !height) throw new ProviderError('invalid_response', 'The image provider returned an unreadable image');
    // The remainder of the bar belongs to the caller, which still has to store the file.
    reportProgress(req.onProgress, 70);
    return { data, contentType, width, height };
  }

  /**
   * Runs one egress exchange, turning its failures into ProviderErrors. A caller abort
   * rejects with the caller's own reason, so the generator recognises its abort.
   */
  private async exchange(what: 'api' | 'image', callerSignal: AbortSignal | undefined, work: () => Promise<EgressResponse>): Promise<EgressResponse> {
    try {
      return await work();
    } catch (err) {
      if (callerSignal?.aborted) throw callerSignal.reason;
      if (!isEgressError(err)) throw err;
      throw what === 'api' ? this.apiFailure(err) : imageUrlFailure(err, this.config.maxImageBytes);
    }
  }

  private apiFailure(err: EgressError): ProviderError {
    switch (err.reason) {
      case 'timeout':
        return new ProviderError('timeout', `The image provider did not answer within ${formatSeconds(this.config.timeoutMs)}`);
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

  /**
   * No Authorization header: the URL usually points at a CDN, which must never see the key.
   * Only through the egress checks: a URL is whatever the upstream says, and its bytes end
   * up at a public URL.
   */
  private async download(url: string, signal: AbortSignal | undefined): Promise<Buffer> {
    if (url.startsWith('data:')) return decodeDataUrl(url);
    const res = await this.exchange('image', signal, () =>
      egressRequest(url, {
        policy: this.downloadPolicy,
        maxBytes: this.config.maxImageBytes,
        timeoutMs: this.config.timeoutMs,
        signal,
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

  private errorForStatus(status: number, headers: Headers, text: string): ProviderError {
    const { message, code } = this.upstreamError(text);
    const detail = message ? `: ${message}` : '';
    if (status === 429) {
      // OpenAI also answers 429 when the account is out of credit; waiting does not fix that.
      if (code === 'insufficient_quota') {
        return new ProviderError('upstream_error', `Upstream account quota exhausted (429)${detail}`, {
          retryable: false,
          status,
          upstreamCode: code,
        });
      }
      return new ProviderError('rate_limited', `Upstream rate limit reached (429)${detail}`, {
        retryAfterMs: parseRetryAfter(headers),
        status,
        upstreamCode: code,
      });
    }
    if (status === 408) return new ProviderError('timeout', `Upstream timed out (408)${detail}`, { status, upstreamCode: code });
    if (status >= 500) {
      return new ProviderError('upstream_error', `Upstream error (${status})${detail}`, { retryable: true, status, upstreamCode: code });
    }
    return new ProviderError('bad_request', `Upstream refused the request (${status})${detail}`, { status, upstreamCode: code });
  }

  /** error.message from an OpenAI-style body, else the raw text; one line, short, key scrubbed. */
  private upstreamError(text: string): { message: string; code?: string } {
    let message = text;
    let code: string | undefined;
    try {
      const parsed = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; type?: unknown } | string };
      if (typeof parsed?.error === 'string') message = parsed.error;
      else if (parsed?.error && typeof parsed.error === 'object') {
        if (typeof parsed.error.message === 'string') message = parsed.error.message;
        if (typeof parsed.error.code === 'string') code = parsed.error.code;
        else if (typeof parsed.error.type === 'string') code = parsed.error.type;
      }
    } catch {
      // not JSON: quote the text itself
    }
    if (this.config.apiKey) message = message.split(this.config.apiKey).join('[redacted]');
    message = message.replace(/\s+/g, ' ').trim();
    if (message.length > UPSTREAM_MESSAGE_MAX) message = `${message.slice(0, UPSTREAM_MESSAGE_MAX - 1)}…`;
    return { message, code };
  }
}

/** A refused or failed result URL: a non-retryable failure unless it is plain network trouble. */
function imageUrlFailure(err: EgressError, maxImageBytes: number): ProviderError {
  switch (err.reason) {
    case 'timeout':
      return new ProviderError('timeout', `Downloading the generated image timed out (${err.message})`);
    case 'network':
      return new ProviderError('upstream_error', `Could not download the generated image${err.detail.code ? ` (${err.detail.code})` : ''}`, {
        retryable: true,
      });
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

/** data: URLs carry the image inline (some compatible servers answer so); no network involved. */
async function decodeDataUrl(url: string): Promise<Buffer> {
  try {
    return Buffer.from(await (await fetch(url)).arrayBuffer());
  } catch {
    throw new ProviderError('invalid_response', 'The image provider returned an unreadable data: URL');
  }
}

function originOf(baseUrl: string): string {
  try {
    return new URL(baseUrl).origin;
  } catch {
    return 'null'; // no origin: the exchange itself refuses the URL
  }
}

function headersOf(res: EgressResponse): Headers {
  const headers = new Headers();
  for (const [name, value] of Object.entries(res.headers)) {
    if (typeof value === 'string') headers.set(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  return headers;
}

/** b64_json is preferred when an upstream sends both: it needs no second request. */
function parseFirstImage(payload: string): { b64: string } | { url: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    throw new ProviderError('invalid_response', 'The image provider answered with something other than JSON');
  }
  const first = (parsed as { data?: unknown })?.data;
  const item = Array.isArray(first) ? (first[0] as { b64_json?: unknown; url?: unknown } | undefined) : undefined;
  if (item && typeof item.b64_json === 'string' && item.b64_json.length > 0) return { b64: item.b64_json };
  if (item && typeof item.url === 'string' && item.url.length > 0) return { url: item.url };
  throw new ProviderError('invalid_response', 'The image provider answered without an image (no data[0].b64_json or url)');
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

function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
