import sharp from 'sharp';
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
}

const UPSTREAM_MESSAGE_MAX = 200;

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
 */
export class OpenAiProvider implements ImageProvider {
  private readonly baseUrl: string;

  constructor(private readonly config: OpenAiProviderConfig) {
    this.baseUrl = config.baseUrl.replace(/\/+$/, '');
  }

  async render(req: RenderRequest): Promise<RenderResult> {
    throwIfAborted(req.signal);
    const size = this.config.sizeMap?.[`${req.width}x${req.height}`] ?? `${req.width}x${req.height}`;
    // 'auto' is every upstream's default, and a '#RRGGBB' colour has no upstream equivalent.
    const quality = req.quality !== null && req.quality !== 'auto' ? req.quality : undefined;
    const background = req.background === 'transparent' ? 'transparent' : undefined;
    const headers: Record<string, string> = { authorization: `Bearer ${this.config.apiKey}` };

    let url: string;
    let body: string | FormData;
    if (req.references.length === 0) {
      url = `${this.baseUrl}/images/generations`;
      headers['content-type'] = 'application/json';
      body = JSON.stringify({ model: this.config.model, prompt: req.prompt, n: 1, size, quality, background });
    } else {
      url = `${this.baseUrl}/images/edits`;
      const form = new FormData();
      form.append('model', this.config.model);
      form.append('prompt', req.prompt);
      form.append('n', '1');
      form.append('size', size);
      if (quality) form.append('quality', quality);
      if (background) form.append('background', background);
      req.references.forEach((ref, i) => {
        const ext = EXTENSION_BY_TYPE[ref.contentType] ?? 'bin';
        form.append('image[]', new Blob([new Uint8Array(ref.data)], { type: ref.contentType }), `ref-${i}.${ext}`);
      });
      body = form; // fetch sets the multipart boundary itself
    }

    const payload = await this.withDeadline(req.signal, async (signal) => {
      const res = await fetch(url, { method: 'POST', headers, body, signal });
      const text = await res.text();
      if (!res.ok) throw this.errorForStatus(res, text);
      return text;
    });
    reportProgress(req.onProgress, 60);

    const first = parseFirstImage(payload);
    const data =
      'b64' in first ? Buffer.from(first.b64, 'base64') : await this.withDeadline(req.signal, (s) => this.download(first.url, s));
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
   * Runs one upstream exchange (request and body) under its own timeout, also ending it when
   * the caller aborts. Combined by hand rather than with AbortSignal.any, so a long-lived
   * caller signal does not collect a listener per render.
   */
  private async withDeadline<T>(callerSignal: AbortSignal | undefined, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort(new DOMException('The upstream call timed out', 'TimeoutError'));
    }, this.config.timeoutMs);
    const onCallerAbort = (): void => controller.abort(callerSignal!.reason);
    callerSignal?.addEventListener('abort', onCallerAbort, { once: true });
    try {
      return await work(controller.signal);
    } catch (err) {
      if (err instanceof ProviderError) throw err;
      if (callerSignal?.aborted) throw callerSignal.reason;
      if (timedOut) {
        throw new ProviderError('timeout', `The image provider did not answer within ${formatSeconds(this.config.timeoutMs)}`);
      }
      throw new ProviderError('upstream_error', `Could not reach the image provider${networkCode(err)}`, { retryable: true });
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    }
  }

  /** No Authorization header: the URL usually points at a CDN, which must never see the key. */
  private async download(url: string, signal: AbortSignal): Promise<Buffer> {
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ProviderError('invalid_response', 'The image provider returned an image URL that is not a URL');
    }
    if (!['http:', 'https:', 'data:'].includes(parsed.protocol)) {
      throw new ProviderError('invalid_response', `The image provider returned an unsupported image URL scheme (${parsed.protocol})`);
    }
    const res = await fetch(parsed, { signal });
    if (!res.ok) {
      await res.body?.cancel();
      const retryable = res.status === 429 || res.status >= 500;
      throw new ProviderError(retryable ? 'upstream_error' : 'invalid_response', `Downloading the generated image failed (${res.status})`, {
        retryable,
        status: res.status,
      });
    }
    return Buffer.from(await res.arrayBuffer());
  }

  private errorForStatus(res: Response, text: string): ProviderError {
    const status = res.status;
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
        retryAfterMs: parseRetryAfter(res.headers),
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

function networkCode(err: unknown): string {
  const code = (err as { cause?: { code?: unknown } })?.cause?.code;
  return typeof code === 'string' && /^[A-Z_]+$/.test(code) ? ` (${code})` : '';
}

function formatSeconds(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : `${(ms / 1000).toFixed(1)} s`;
}
