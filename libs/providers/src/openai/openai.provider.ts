import { EgressPolicy } from '@app/egress';
import { ImageProvider, ProviderError, RenderRequest, RenderResult } from '../render.types';
import type { TokenUsage } from '../price-rule';
import { openAiUsageOf } from './openai.usage';
import { reportProgress, throwIfAborted } from '../provider.utils';
import { checkedImage, downloadImage, parseRateHeaders, postForImagePayload, upstreamPolicies } from '../upstream-http';
import { classifyOpenAiError } from './openai.errors';

export { parseRetryAfter } from '../upstream-http';

export interface OpenAiProviderConfig {
  /** e.g. https://api.openai.com/v1 (a trailing slash is tolerated). */
  baseUrl: string;
  apiKey: string;
  /** Upstream model name, e.g. gpt-image-1. */
  model: string;
  /** Kiln "WxH" -> upstream size string; sizes not listed are sent as "WxH". */
  sizeMap?: Record<string, string>;
  /**
   * The route's size rule (openai.sizes.ts), which the openai type passes: it picks what a
   * known model takes and applies the sizeMap itself. Absent: sizeMap, else the exact size.
   */
  upstreamSize?: (asked: { width: number; height: number }) => string;
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

/** gpt-image models always answer in base64 and refuse a response_format parameter. */
const ALWAYS_BASE64_MODEL = /^gpt-image/i;

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
    const policies = upstreamPolicies(this.baseUrl, config.allowPrivate);
    this.apiPolicy = policies.api;
    this.downloadPolicy = policies.download;
  }

  async render(req: RenderRequest): Promise<RenderResult> {
    throwIfAborted(req.signal);
    const { size, quality, background, response_format: responseFormat } = openAiGenerationsBody(this.config, req);
    const headers: Record<string, string> = { authorization: `Bearer ${this.config.apiKey}` };

    let url: string;
    let body: Buffer;
    if (req.references.length === 0) {
      url = `${this.baseUrl}/images/generations`;
      headers['content-type'] = 'application/json';
      body = Buffer.from(JSON.stringify(openAiGenerationsBody(this.config, req)));
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

    const answer = await postForImagePayload({
      url,
      policy: this.apiPolicy,
      headers,
      body,
      config: this.config,
      signal: req.signal,
      classify: classifyOpenAiError,
    });
    reportProgress(req.onProgress, 60);

    const first = parseFirstImage(answer.payload);
    const data =
      'b64' in first
        ? Buffer.from(first.b64, 'base64')
        : await downloadImage(first.url, { ...this.config, policy: this.downloadPolicy, signal: req.signal });
    const image = await checkedImage(data, this.config.maxImageBytes);
    // The remainder of the bar belongs to the caller, which still has to store the file.
    reportProgress(req.onProgress, 70);
    const rateHeaders = parseRateHeaders(answer.headers);
    return { ...image, ...(rateHeaders ? { rateHeaders } : {}), ...(first.usage ? { usage: first.usage } : {}) };
  }
}

/**
 * The JSON body of /images/generations for a render (also each line's body in the Batch
 * API, openai.batch.ts): the route's size rule, quality and background when they mean
 * something upstream, base64 asked for where the model takes the parameter.
 */
export function openAiGenerationsBody(
  config: Pick<OpenAiProviderConfig, 'model' | 'sizeMap' | 'upstreamSize'>,
  req: Pick<RenderRequest, 'prompt' | 'width' | 'height' | 'quality' | 'background'>,
): { model: string; prompt: string; n: 1; size: string; quality?: string; background?: 'transparent'; response_format?: 'b64_json' } {
  const size = config.upstreamSize
    ? config.upstreamSize({ width: req.width, height: req.height })
    : (config.sizeMap?.[`${req.width}x${req.height}`] ?? `${req.width}x${req.height}`);
  // 'auto' is every upstream's default, and a '#RRGGBB' colour has no upstream equivalent.
  const quality = req.quality !== null && req.quality !== 'auto' ? req.quality : undefined;
  const background = req.background === 'transparent' ? 'transparent' : undefined;
  // Where the upstream honours it, ask for the image itself rather than a URL to fetch.
  const responseFormat = ALWAYS_BASE64_MODEL.test(config.model) ? undefined : 'b64_json';
  return { model: config.model, prompt: req.prompt, n: 1, size, quality, background, response_format: responseFormat };
}

/** b64_json is preferred when an upstream sends both: it needs no second request. */
export function parseFirstImage(payload: string): ({ b64: string } | { url: string }) & { usage?: TokenUsage } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    throw new ProviderError('invalid_response', 'The image provider answered with something other than JSON');
  }
  const first = (parsed as { data?: unknown })?.data;
  const item = Array.isArray(first) ? (first[0] as { b64_json?: unknown; url?: unknown } | undefined) : undefined;
  // The tokens the answer reports, which price the image where the route's rule has token prices.
  const usage = openAiUsageOf(parsed);
  const reported = usage ? { usage } : {};
  if (item && typeof item.b64_json === 'string' && item.b64_json.length > 0) return { b64: item.b64_json, ...reported };
  if (item && typeof item.url === 'string' && item.url.length > 0) return { url: item.url, ...reported };
  throw new ProviderError('invalid_response', 'The image provider answered without an image (no data[0].b64_json or url)');
}
