import { ProviderError, RenderRequest } from '../provider.types';
import type { QueueImageProvider, UpstreamPoll, UpstreamSubmission } from '../provider-type';
import { QueueProviderBase, QueueProviderDeps, QueueRouteSettings } from '../queue-route';
import { fitPixels, nearestRatio, PixelRange } from '../queue-sizes';
import { dataUri, objectOf } from '../queue-http';

/** A route to Replicate's predictions API (an official model, `owner/name`). */
export interface ReplicateRoute extends QueueRouteSettings {
  type: 'replicate';
  /** `aspect_ratio` from `aspectRatios` (FLUX on Replicate, default), or `width`/`height` within `pixelRange`. */
  sizeInput?: 'aspect_ratio' | 'width_height';
  aspectRatios?: string[];
  pixelRange?: PixelRange;
  /** The input field taking a reference image (a data URI): `input_image` (default), `image_prompt`, `image`. */
  referenceInput?: string;
}

export const REPLICATE_DEFAULTS = {
  baseUrl: 'https://api.replicate.com/v1',
  apiKeyEnv: 'REPLICATE_API_TOKEN',
  sizeInput: 'aspect_ratio' as const,
  aspectRatios: ['1:1', '16:9', '21:9', '3:2', '2:3', '4:5', '5:4', '3:4', '4:3', '9:16', '9:21'],
  pixelRange: { min: 256, max: 1440, multiple: 32 },
  referenceInput: 'input_image',
};

export function replicateLabel(route: ReplicateRoute): string {
  return `replicate (${route.model})`;
}

/** Replicate's failures that are its content filter's: the error text says so. */
const REFUSAL = /nsfw|sensitive|flagged|safety|content policy|moderat/i;

/**
 * Replicate: `POST {baseUrl}/models/{owner}/{name}/predictions` `{input}` with `Authorization:
 * Bearer` answers a prediction; `GET {baseUrl}/predictions/{id}` (its `urls.get`) until
 * `succeeded` (output: a URL or a list of them), `failed`, `canceled` or `aborted`. No
 * `Prefer: wait`: Kiln never holds a connection while the image is made.
 */
export class ReplicateProvider extends QueueProviderBase implements QueueImageProvider {
  private readonly auth: Record<string, string>;

  constructor(
    private readonly route: ReplicateRoute,
    deps: QueueProviderDeps,
  ) {
    super('Replicate', REPLICATE_DEFAULTS.baseUrl, route, deps);
    this.auth = { authorization: `Bearer ${deps.apiKey}` };
  }

  input(req: RenderRequest): Record<string, unknown> {
    const input: Record<string, unknown> = { prompt: req.prompt, seed: req.seed, num_outputs: 1, output_format: 'png' };
    if ((this.route.sizeInput ?? REPLICATE_DEFAULTS.sizeInput) === 'width_height') {
      Object.assign(input, fitPixels(req.width, req.height, this.route.pixelRange ?? REPLICATE_DEFAULTS.pixelRange));
    } else {
      input.aspect_ratio = nearestRatio(req.width, req.height, this.route.aspectRatios ?? REPLICATE_DEFAULTS.aspectRatios);
    }
    if (req.references.length > 0) input[this.route.referenceInput ?? REPLICATE_DEFAULTS.referenceInput] = dataUri(req.references[0]);
    return { ...input, ...this.route.input };
  }

  async submit(req: RenderRequest): Promise<UpstreamSubmission> {
    const [owner, name] = this.route.model.split(':')[0].split('/');
    const url = `${this.http.baseUrl}/models/${encodeURIComponent(owner)}/${encodeURIComponent(name ?? '')}/predictions`;
    const answer = await this.http.call('POST', url, this.auth, { input: this.input(req) }, { signal: req.signal });
    if (answer.status < 200 || answer.status >= 300) throw this.http.errorFor(answer, (a) => REFUSAL.test(this.http.upstreamMessage(a)));
    const body = objectOf(answer, 'Replicate');
    if (typeof body.id !== 'string' || !body.id) throw new ProviderError('invalid_response', 'Replicate answered without a prediction id');
    const urls = (body.urls ?? {}) as { get?: unknown };
    return { requestId: body.id, state: { getUrl: this.http.sameOriginOr(urls.get, `${this.http.baseUrl}/predictions/${encodeURIComponent(body.id)}`) } };
  }

  async poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll> {
    try {
      const answer = await this.http.call('GET', submission.state.getUrl, this.auth, undefined, { signal, poll: true });
      if (answer.status === 404) {
        return { state: 'failed', error: new ProviderError('upstream_error', 'Replicate no longer knows the prediction (404)', { status: 404 }) };
      }
      if (answer.status < 200 || answer.status >= 300) return this.pollTrouble(this.http.errorFor(answer));
      const body = objectOf(answer, 'Replicate');
      switch (body.status) {
        case 'succeeded': {
          const output = Array.isArray(body.output) ? body.output[0] : body.output;
          if (typeof output !== 'string' || !output) {
            return { state: 'failed', error: new ProviderError('invalid_response', 'Replicate succeeded without an output URL') };
          }
          return { state: 'done', resultUrl: output };
        }
        case 'failed':
        case 'canceled':
        case 'aborted': {
          const message = this.http.scrub(typeof body.error === 'string' ? body.error : String(body.status));
          if (REFUSAL.test(message)) return { state: 'failed', error: new ProviderError('content_refused', `Replicate refused the content: ${message}`) };
          return { state: 'failed', error: new ProviderError('upstream_error', `Replicate's prediction ${body.status}: ${message}`, { retryable: true }) };
        }
        default:
          return { state: 'waiting' };
      }
    } catch (err) {
      if (signal?.aborted) throw err;
      return this.pollTrouble(err);
    }
  }
}
