import { ProviderError, RenderRequest } from '../render.types';
import type { QueueImageProvider, UpstreamCancel, UpstreamPoll, UpstreamSubmission } from '../provider-type';
import { QueueProviderBase, QueueProviderDeps, QueueRouteSettings } from '../queue-route';
import { fitPixels, nearestRatio, PixelRange } from '../queue-sizes';
import { dataUri, objectOf, ParsedUpstreamAnswer } from '../queue-http';

/** A route to fal's queue (docs.fal.ai, model endpoints / queue). */
export interface FalRoute extends QueueRouteSettings {
  type: 'fal';
  /**
   * How the model takes its size: `image_size` `{width, height}` (FLUX dev and schnell), or
   * `aspect_ratio` "w:h" from `aspectRatios` (FLUX 1.1 pro ultra and the like).
   */
  sizeInput?: 'image_size' | 'aspect_ratio';
  /** For `image_size`: each side's range and multiple (default 256..2048, multiples of 16). */
  pixelRange?: PixelRange;
  /** For `aspect_ratio`: the ratios the model takes. */
  aspectRatios?: string[];
  /** The input field taking reference images as URLs: `image_urls` (a list, default), `image_url` (one). */
  referenceInput?: string;
}

export const FAL_DEFAULTS = {
  baseUrl: 'https://queue.fal.run',
  apiKeyEnv: 'FAL_KEY',
  sizeInput: 'image_size' as const,
  pixelRange: { min: 256, max: 2048, multiple: 16 },
  aspectRatios: ['21:9', '16:9', '4:3', '3:2', '1:1', '2:3', '3:4', '9:16', '9:21'],
  referenceInput: 'image_urls',
};

/** The label operators see in logs and metrics. */
export function falLabel(route: FalRoute): string {
  return `fal (${route.model})`;
}

/** fal's queue keeps requests under the model id's first two segments (as @fal-ai/client builds its URLs). */
function appIdOf(model: string): string {
  return model.split('/').filter(Boolean).slice(0, 2).join('/');
}

/** fal's own words for a content refusal: the error type content_policy_violation, or a safety checker's verdict. */
function falRefused(answer: ParsedUpstreamAnswer): boolean {
  return /content_policy_violation|content policy|nsfw|safety/i.test(answer.text);
}

/**
 * fal's queue: `POST {baseUrl}/{model}` (`Authorization: Key`) answers `{request_id,
 * status_url, response_url}`; the status URL says IN_QUEUE, IN_PROGRESS, then COMPLETED; the
 * result (`GET .../requests/{id}`) carries `images[0].url`. The status and result URLs are
 * built as fal's SDK builds them, so the key is only ever sent to the base URL's origin.
 */
export class FalProvider extends QueueProviderBase implements QueueImageProvider {
  private readonly auth: Record<string, string>;

  constructor(
    private readonly route: FalRoute,
    deps: QueueProviderDeps,
  ) {
    super('fal', FAL_DEFAULTS.baseUrl, route, deps);
    this.auth = { authorization: `Key ${deps.apiKey}` };
  }

  /** The JSON input fal gets for a render (exported for the request-shape test). */
  input(req: RenderRequest): Record<string, unknown> {
    const input: Record<string, unknown> = { prompt: req.prompt, seed: req.seed, num_images: 1 };
    if ((this.route.sizeInput ?? FAL_DEFAULTS.sizeInput) === 'aspect_ratio') {
      input.aspect_ratio = nearestRatio(req.width, req.height, this.route.aspectRatios ?? FAL_DEFAULTS.aspectRatios);
    } else {
      input.image_size = fitPixels(req.width, req.height, this.route.pixelRange ?? FAL_DEFAULTS.pixelRange);
    }
    if (req.references.length > 0) {
      const field = this.route.referenceInput ?? FAL_DEFAULTS.referenceInput;
      const uris = req.references.map(dataUri);
      input[field] = field.endsWith('s') ? uris : uris[0];
    }
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
    if (answer.status < 200 || answer.status >= 300) throw this.http.errorFor(answer, falRefused);
    const body = objectOf(answer, 'fal');
    const requestId = body.request_id;
    if (typeof requestId !== 'string' || !requestId)
      throw new ProviderError('invalid_response', 'fal answered the submit without a request_id');
    const base = `${this.http.baseUrl}/${appIdOf(this.route.model)}/requests/${encodeURIComponent(requestId)}`;
    return {
      requestId,
      state: {
        statusUrl: this.http.sameOriginOr(body.status_url, `${base}/status`),
        responseUrl: this.http.sameOriginOr(body.response_url, base),
        cancelUrl: this.http.sameOriginOr(body.cancel_url, `${base}/cancel`),
      },
    };
  }

  /**
   * `PUT .../requests/{id}/cancel`: 202 (CANCELLATION_REQUESTED) takes a request still in the
   * queue out of it, so it never runs; 400 (ALREADY_COMPLETED) means it runs or ran, and is
   * billed. A request submitted before Kiln kept the cancel URL gets the one fal's SDK builds.
   */
  cancel(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamCancel> {
    const url = submission.state.cancelUrl ?? submission.state.responseUrl.replace(/\/?$/, '/cancel');
    return this.cancelCall(
      'PUT',
      url,
      this.auth,
      (answer) => {
        const said = `${answer.status} ${this.http.upstreamMessage(answer) || ''}`.trim();
        if (answer.status === 202) return { outcome: 'cancelled', detail: said };
        // 400 ALREADY_COMPLETED (running or done); 404 fal no longer knows it: its poll tells how it ended.
        return { outcome: answer.status === 400 ? 'runs' : 'unknown', detail: said };
      },
      signal,
    );
  }

  async poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll> {
    try {
      const status = await this.http.call('GET', submission.state.statusUrl, this.auth, undefined, { signal, poll: true });
      if (status.status === 404) {
        return { state: 'failed', error: new ProviderError('upstream_error', 'fal no longer knows the request (404)', { status: 404 }) };
      }
      if (status.status < 200 || status.status >= 300) return this.pollTrouble(this.http.errorFor(status, falRefused));
      const state = objectOf(status, 'fal').status;
      if (state !== 'COMPLETED') return { state: 'waiting' };

      const result = await this.http.call('GET', submission.state.responseUrl, this.auth, undefined, { signal, poll: true });
      if (result.status === 429 || result.status === 408) return this.pollTrouble(this.http.errorFor(result));
      // The request's own outcome: 422 (fal's validation or content policy) or a failed run
      // (5xx, which fal does not bill): a new attempt, unless the content was refused.
      if (result.status < 200 || result.status >= 300) return { state: 'failed', error: this.http.errorFor(result, falRefused) };
      const body = objectOf(result, 'fal');
      const nsfw = body.has_nsfw_concepts;
      if (Array.isArray(nsfw) && nsfw[0] === true) {
        return {
          state: 'failed',
          error: new ProviderError('content_refused', "fal's safety checker refused the image (has_nsfw_concepts)"),
        };
      }
      const images = body.images;
      const first = Array.isArray(images) ? (images[0] as { url?: unknown } | undefined) : undefined;
      if (!first || typeof first.url !== 'string' || !first.url) {
        return { state: 'failed', error: new ProviderError('invalid_response', 'fal answered without an image (no images[0].url)') };
      }
      return { state: 'done', resultUrl: first.url };
    } catch (err) {
      if (signal?.aborted) throw err;
      return this.pollTrouble(err);
    }
  }
}
