import { ProviderError, RenderRequest } from '../render.types';
import type { QueueImageProvider, SubmitLookup, UpstreamCancel, UpstreamPoll, UpstreamSubmission } from '../provider-type';
import { findPrediction, ReplicateSubmitKey } from './replicate.lookup';
import { QueueProviderBase, QueueProviderDeps, QueueRouteSettings } from '../queue-route';
import { fitPixels, nearestRatio, PixelRange } from '../queue-sizes';
import { dataUri, objectOf } from '../queue-http';

/** A route to Replicate's predictions API (an official model, `owner/name`). */
export interface ReplicateRoute extends QueueRouteSettings {
  type: 'replicate';
  /**
   * `aspect_ratio` from `aspectRatios` (FLUX on Replicate, default); `width`/`height` within
   * `pixelRange`; or `aspect_ratio_custom`: `aspect_ratio: "custom"` with `width`/`height`
   * (FLUX1.1 [pro] takes an exact size only so).
   */
  sizeInput?: 'aspect_ratio' | 'width_height' | 'aspect_ratio_custom';
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
    const sizeInput = this.route.sizeInput ?? REPLICATE_DEFAULTS.sizeInput;
    if (sizeInput === 'aspect_ratio') {
      input.aspect_ratio = nearestRatio(req.width, req.height, this.route.aspectRatios ?? REPLICATE_DEFAULTS.aspectRatios);
    } else {
      if (sizeInput === 'aspect_ratio_custom') input.aspect_ratio = 'custom';
      Object.assign(input, fitPixels(req.width, req.height, this.route.pixelRange ?? REPLICATE_DEFAULTS.pixelRange));
    }
    if (req.references.length > 0) input[this.route.referenceInput ?? REPLICATE_DEFAULTS.referenceInput] = dataUri(req.references[0]);
    return { ...input, ...this.route.input };
  }

  async submit(req: RenderRequest): Promise<UpstreamSubmission> {
    const [owner, name] = this.route.model.split(':')[0].split('/');
    const url = `${this.http.baseUrl}/models/${encodeURIComponent(owner)}/${encodeURIComponent(name ?? '')}/predictions`;
    const answer = await this.http.call('POST', url, this.auth, { input: this.input(req) }, { signal: req.signal });
    if (answer.status < 200 || answer.status >= 300) throw this.http.errorFor(answer, (a) => REFUSAL.test(this.http.upstreamMessage(a)));
    return this.submissionOf(objectOf(answer, 'Replicate'));
  }

  /** The model, prompt and seed: Kiln gives each task its own seed, so they find its prediction in the listing. */
  submitKey(req: RenderRequest): Record<string, unknown> {
    const key: ReplicateSubmitKey = { model: this.route.model.split(':')[0], prompt: req.prompt, seed: req.seed };
    return { ...key };
  }

  /** A submit in doubt: looked for in the key's predictions listing (replicate.lookup.ts). */
  findSubmitted(key: Record<string, unknown>, since: Date, signal?: AbortSignal): Promise<SubmitLookup> {
    return findPrediction(this.http, this.auth, key as unknown as ReplicateSubmitKey, since, (body) => this.submissionOf(body), signal);
  }

  private submissionOf(body: Record<string, unknown>): UpstreamSubmission {
    if (typeof body.id !== 'string' || !body.id) throw new ProviderError('invalid_response', 'Replicate answered without a prediction id');
    const urls = (body.urls ?? {}) as { get?: unknown; cancel?: unknown };
    const own = `${this.http.baseUrl}/predictions/${encodeURIComponent(body.id)}`;
    return {
      requestId: body.id,
      state: { getUrl: this.http.sameOriginOr(urls.get, own), cancelUrl: this.http.sameOriginOr(urls.cancel, `${own}/cancel`) },
    };
  }

  /**
   * `POST /predictions/{id}/cancel` (its `urls.cancel`) answers the prediction: `canceled`
   * without output is confirmed not made; `succeeded` was made (and billed). Anything else
   * (still `starting`/`processing` while the cancel is taken, `failed`) is for the poll to tell.
   */
  cancel(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamCancel> {
    const url = submission.state.cancelUrl ?? `${submission.state.getUrl}/cancel`;
    return this.cancelCall(
      'POST',
      url,
      this.auth,
      (answer) => {
        const body = (answer.json ?? {}) as { status?: unknown; output?: unknown };
        const status = typeof body.status === 'string' ? body.status : `HTTP ${answer.status}`;
        const noOutput = body.output === null || body.output === undefined || (Array.isArray(body.output) && body.output.length === 0);
        if (answer.status >= 200 && answer.status < 300 && status === 'canceled' && noOutput)
          return { outcome: 'cancelled', detail: status };
        if (status === 'succeeded') return { outcome: 'runs', detail: status };
        return { outcome: 'unknown', detail: status };
      },
      signal,
    );
  }

  async poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll> {
    try {
      const answer = await this.http.call('GET', submission.state.getUrl, this.auth, undefined, { signal, poll: true });
      if (answer.status === 404) {
        return {
          state: 'failed',
          error: new ProviderError('upstream_error', 'Replicate no longer knows the prediction (404)', { status: 404 }),
        };
      }
      if (answer.status < 200 || answer.status >= 300) return this.pollTrouble(this.http.errorFor(answer));
      const body = objectOf(answer, 'Replicate');
      switch (body.status) {
        case 'succeeded': {
          const output: unknown = Array.isArray(body.output) ? body.output[0] : body.output;
          if (typeof output !== 'string' || !output) {
            return { state: 'failed', error: new ProviderError('invalid_response', 'Replicate succeeded without an output URL') };
          }
          // The run time Replicate bills a per-second model by.
          const predictTime = (body.metrics as { predict_time?: unknown } | undefined)?.predict_time;
          const runSeconds =
            typeof predictTime === 'number' && Number.isFinite(predictTime) && predictTime >= 0 ? { runSeconds: predictTime } : {};
          return { state: 'done', resultUrl: output, ...runSeconds };
        }
        case 'failed':
        case 'canceled':
        case 'aborted': {
          const message = this.http.scrub(typeof body.error === 'string' ? body.error : String(body.status));
          if (REFUSAL.test(message))
            return { state: 'failed', error: new ProviderError('content_refused', `Replicate refused the content: ${message}`) };
          return {
            state: 'failed',
            error: new ProviderError('upstream_error', `Replicate's prediction ${body.status}: ${message}`, { retryable: true }),
          };
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
