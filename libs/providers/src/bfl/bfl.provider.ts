import { ProviderError, RenderRequest } from '../render.types';
import type { QueueImageProvider, UpstreamPoll, UpstreamSubmission } from '../provider-type';
import { QueueProviderBase, QueueProviderDeps, QueueRouteSettings } from '../queue-route';
import { fitPixels, nearestRatio, PixelRange } from '../queue-sizes';
import { objectOf } from '../queue-http';

/** A route to Black Forest Labs' API. */
export interface BflRoute extends QueueRouteSettings {
  type: 'bfl';
  /** `width_height` within `pixelRange` (FLUX1.1 pro, default) or `aspect_ratio` (ultra, kontext). */
  sizeInput?: 'width_height' | 'aspect_ratio';
  pixelRange?: PixelRange;
  aspectRatios?: string[];
  /** The input field taking a reference image as base64: `image_prompt` (default) or `input_image` (kontext). */
  referenceInput?: string;
}

export const BFL_DEFAULTS = {
  baseUrl: 'https://api.bfl.ai/v1',
  apiKeyEnv: 'BFL_API_KEY',
  sizeInput: 'width_height' as const,
  pixelRange: { min: 256, max: 1440, multiple: 32 },
  aspectRatios: ['21:9', '16:9', '4:3', '3:2', '1:1', '2:3', '3:4', '9:16', '9:21'],
  referenceInput: 'image_prompt',
};

export function bflLabel(route: BflRoute): string {
  return `bfl (${route.model})`;
}

/** BFL's statuses that are its moderation's refusal. */
const MODERATED = new Set(['Request Moderated', 'Content Moderated']);

/**
 * BFL: `POST {baseUrl}/{model}` with `x-key` and `{prompt, width, height, seed}` answers
 * `{id, polling_url}`; the polling URL says Pending until `Ready` (`result.sample`, a signed
 * URL) or Error, Failed, Request Moderated, Content Moderated, Task not found. The key is
 * sent to the polling URL only when it is on the base URL's domain (BFL answers regional
 * hosts such as api.us1.bfl.ai); otherwise `{baseUrl}/get_result?id=` is polled.
 */
export class BflProvider extends QueueProviderBase implements QueueImageProvider {
  private readonly auth: Record<string, string>;

  constructor(
    private readonly route: BflRoute,
    deps: QueueProviderDeps,
  ) {
    super('BFL', BFL_DEFAULTS.baseUrl, route, deps);
    this.auth = { 'x-key': deps.apiKey };
  }

  input(req: RenderRequest): Record<string, unknown> {
    const input: Record<string, unknown> = { prompt: req.prompt, seed: req.seed, output_format: 'png' };
    if ((this.route.sizeInput ?? BFL_DEFAULTS.sizeInput) === 'aspect_ratio') {
      input.aspect_ratio = nearestRatio(req.width, req.height, this.route.aspectRatios ?? BFL_DEFAULTS.aspectRatios);
    } else {
      Object.assign(input, fitPixels(req.width, req.height, this.route.pixelRange ?? BFL_DEFAULTS.pixelRange));
    }
    if (req.references.length > 0)
      input[this.route.referenceInput ?? BFL_DEFAULTS.referenceInput] = req.references[0].data.toString('base64');
    return { ...input, ...this.route.input };
  }

  async submit(req: RenderRequest): Promise<UpstreamSubmission> {
    const answer = await this.http.call(
      'POST',
      `${this.http.baseUrl}/${this.route.model.replace(/^\/+/, '')}`,
      this.auth,
      this.input(req),
      {
        signal: req.signal,
      },
    );
    if (answer.status < 200 || answer.status >= 300) throw this.http.errorFor(answer, (a) => /moderat/i.test(a.text));
    const body = objectOf(answer, 'BFL');
    if (typeof body.id !== 'string' || !body.id) throw new ProviderError('invalid_response', 'BFL answered without a request id');
    const fallback = `${this.http.baseUrl}/get_result?id=${encodeURIComponent(body.id)}`;
    return {
      requestId: body.id,
      state: { pollingUrl: this.http.sameOriginOr(body.polling_url, fallback, (url) => this.onOwnDomain(url)) },
    };
  }

  async poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll> {
    try {
      const answer = await this.http.call('GET', submission.state.pollingUrl, this.auth, undefined, { signal, poll: true });
      if (answer.status === 404) {
        return { state: 'failed', error: new ProviderError('upstream_error', 'BFL no longer knows the request (404)', { status: 404 }) };
      }
      if (answer.status < 200 || answer.status >= 300) return this.pollTrouble(this.http.errorFor(answer));
      const body = objectOf(answer, 'BFL');
      const status = String(body.status);
      if (status === 'Ready') {
        const sample = (body.result as { sample?: unknown } | undefined)?.sample;
        if (typeof sample !== 'string' || !sample)
          return { state: 'failed', error: new ProviderError('invalid_response', 'BFL was Ready without result.sample') };
        return { state: 'done', resultUrl: sample };
      }
      if (MODERATED.has(status))
        return { state: 'failed', error: new ProviderError('content_refused', `BFL refused the content (${status})`) };
      if (status === 'Error' || status === 'Failed' || status === 'Task not found') {
        return { state: 'failed', error: new ProviderError('upstream_error', `BFL's request ended: ${status}`, { retryable: true }) };
      }
      return { state: 'waiting' };
    } catch (err) {
      if (signal?.aborted) throw err;
      return this.pollTrouble(err);
    }
  }

  /** https on the base URL's parent domain (api.bfl.ai -> *.bfl.ai). */
  private onOwnDomain(url: URL): boolean {
    const base = new URL(this.http.baseUrl);
    const parent = base.hostname.split('.').slice(1).join('.');
    return url.protocol === 'https:' && parent.includes('.') && url.hostname.endsWith(`.${parent}`);
  }
}
