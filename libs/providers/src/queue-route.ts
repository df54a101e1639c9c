import { isAspectRatio, parseAspectRatio } from '@app/geometry';
import type { RouteSetting, SizeAsked, UnknownSubmitPolicy, UpstreamCancel, UpstreamPoll, UpstreamSubmission } from './provider-type';
import { ProviderError, RenderRequest, RenderResult } from './render.types';
import { sleep, throwIfAborted } from './provider.utils';
import { ParsedUpstreamAnswer, UpstreamHttp } from './queue-http';
import { fitPixels, nearestRatio, PixelRange } from './queue-sizes';
import { costSetting, RouteCost } from './cost';
import type { PriceRule, TypePricing } from './price-rule';
import { priceSetting } from './price-setting';
import { checks, upstreamSettings } from './route-settings';

/** Poll interval and longest wait when a route does not set them. */
export const DEFAULT_POLL_INTERVAL_MS = 1000;
export const DEFAULT_MAX_WAIT_MS = 30 * 60_000;

/** Settings every queue type's route has (spec: extensions v1.2, section 1). */
export interface QueueRouteSettings {
  /** The upstream model id, in the upstream's own form (each type's presets show it). */
  model: string;
  /** Defaulted per type; https and public unless UPSTREAM_ALLOW_PRIVATE. */
  baseUrl?: string;
  /** The variable holding the key (defaulted per type: its keyVariable; each may come from `<NAME>_FILE`). */
  apiKeyEnv?: string;
  /** Each upstream call (submit, poll, download). */
  timeoutMs?: number;
  /** Concurrent submits and downloads for this model across all generators; waiting tasks hold none. */
  maxConcurrency?: number;
  /** Between two polls of one request (default 1 s). */
  pollIntervalMs?: number;
  /** The longest a request may wait upstream before the task fails (default 30 min). */
  maxWaitMs?: number;
  /** Extra input fields sent as they are (an upstream model's own options). */
  input?: Record<string, unknown>;
  /** The preset the route was expanded from, kept as a label. */
  preset?: string;
  /** The operator's own price table (cost.ts); wins over `price` where it lists the image. */
  cost?: RouteCost;
  /** How the upstream bills an image (price-rule.ts): a route by preset takes the preset's. */
  price?: PriceRule;
  /** A submit in doubt after a crash that the type cannot look up: submitted again (default) or failed and refunded. */
  onUnknownSubmit?: UnknownSubmitPolicy;
}

/** The route's `onUnknownSubmit` when it does not set it. */
export const DEFAULT_ON_UNKNOWN_SUBMIT: UnknownSubmitPolicy = 'resubmit';

/** What a queue type is built with: its key, read by the config lib, and the upstream limits. */
export interface QueueProviderDeps {
  apiKey: string;
  /** The route's timeoutMs, else PROVIDER_TIMEOUT_MS. */
  timeoutMs: number;
  allowPrivate: boolean;
  maxImageBytes: number;
}

/** Shared by the queue types: HTTP, the poll interval and the longest wait. */
export abstract class QueueProviderBase {
  readonly queue = true as const;
  readonly pollIntervalMs: number;
  readonly maxWaitMs: number;
  readonly onUnknownSubmit: UnknownSubmitPolicy;
  protected readonly http: UpstreamHttp;

  protected constructor(label: string, defaultBaseUrl: string, route: QueueRouteSettings, deps: QueueProviderDeps) {
    this.pollIntervalMs = route.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.maxWaitMs = route.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
    this.onUnknownSubmit = route.onUnknownSubmit ?? DEFAULT_ON_UNKNOWN_SUBMIT;
    this.http = new UpstreamHttp({
      label,
      baseUrl: route.baseUrl ?? defaultBaseUrl,
      apiKey: deps.apiKey,
      timeoutMs: deps.timeoutMs,
      allowPrivate: deps.allowPrivate,
      maxImageBytes: deps.maxImageBytes,
    });
  }

  abstract submit(req: RenderRequest): Promise<UpstreamSubmission>;

  /** A type that cannot find a request again stores nothing with its intent. */
  submitKey(_req: RenderRequest): Record<string, unknown> {
    return {};
  }
  abstract poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll>;

  /** The made image at the URL the poll read; no key sent, through the egress checks. */
  fetchResult(
    _submission: UpstreamSubmission,
    req: Pick<RenderRequest, 'signal'>,
    done: Extract<UpstreamPoll, { state: 'done' }>,
  ): Promise<RenderResult> {
    if (!done.resultUrl) throw new ProviderError('invalid_response', `${this.http.label} answered without an image URL`);
    const runSeconds = done.runSeconds;
    return this.http.image(done.resultUrl, req.signal).then((image) => (runSeconds !== undefined ? { ...image, runSeconds } : image));
  }

  /** Submit, poll, fetch in one call (the generator instead records the submission and frees its worker). */
  async render(req: RenderRequest): Promise<RenderResult> {
    const submission = await this.submit(req);
    const deadline = Date.now() + this.maxWaitMs;
    for (;;) {
      throwIfAborted(req.signal);
      if (Date.now() > deadline)
        throw new ProviderError('timeout', `${this.http.label} did not make the image within ${this.maxWaitMs} ms`, { retryable: false });
      const polled = await this.poll(submission, req.signal);
      if (polled.state === 'done') return this.fetchResult(submission, req, polled);
      if (polled.state === 'failed') throw polled.error;
      await sleep(Math.max(this.pollIntervalMs, polled.retryAfterMs ?? 0), req.signal);
    }
  }

  /**
   * One cancel call (`method` and `url` the type's); `read` tells from a 2xx or 4xx answer
   * whether the request ran. 429 is `busy`; 5xx, timeouts and the network are `unknown`.
   */
  protected async cancelCall(
    method: 'PUT' | 'POST',
    url: string,
    headers: Record<string, string>,
    read: (answer: ParsedUpstreamAnswer) => UpstreamCancel,
    signal?: AbortSignal,
  ): Promise<UpstreamCancel> {
    let answer: ParsedUpstreamAnswer;
    try {
      answer = await this.http.call(method, url, headers, undefined, { signal, poll: true });
    } catch (err) {
      if (signal?.aborted) throw err;
      return { outcome: 'unknown', detail: err instanceof Error ? this.http.scrub(err.message) : 'no answer' };
    }
    const said = `${answer.status} ${this.http.upstreamMessage(answer)}`.trim();
    if (answer.status === 429) return { outcome: 'busy', detail: said, retryAfterMs: this.http.errorFor(answer).retryAfterMs };
    if (answer.status >= 500 || answer.status === 408) return { outcome: 'unknown', detail: said };
    return read(answer);
  }

  /** A poll that met passing trouble (429, 5xx, timeouts, the network) waits and polls again; anything else is the request's failure. */
  protected pollTrouble(err: unknown): { state: 'waiting'; retryAfterMs?: number } | { state: 'failed'; error: ProviderError } {
    if (err instanceof ProviderError) {
      if (err.retryable) return { state: 'waiting', retryAfterMs: err.retryAfterMs };
      return { state: 'failed', error: err };
    }
    throw err;
  }
}

/** A queue type's defaults (FAL_DEFAULTS, REPLICATE_DEFAULTS, BFL_DEFAULTS). */
export interface QueueTypeDefaults {
  baseUrl: string;
  apiKeyEnv: string;
  sizeInput: string;
  pixelRange: PixelRange;
  aspectRatios: readonly string[];
  referenceInput: string;
}

/** A queue route with its size settings (each type names the sizeInput values it takes). */
interface QueueSizedRoute extends QueueRouteSettings {
  sizeInput?: string;
  pixelRange?: PixelRange;
  aspectRatios?: readonly string[];
}

/**
 * The part of a queue type's definition that follows from its defaults alone (the same for
 * every queue type): the key variable, upstream work, how a route is described and
 * where it calls, and the size its upstream makes, a ratio being made at `ratioArea` pixels.
 */
export function queueTypeParts<R extends QueueSizedRoute>(
  defaults: QueueTypeDefaults,
  label: (route: R) => string,
  ratioArea: (asked: SizeAsked) => number,
) {
  return {
    keyVariable: defaults.apiKeyEnv,
    work: 'upstream' as const,
    describe: (route: R) => `${label(route)} ${route.baseUrl ?? defaults.baseUrl}`,
    upstreamUrl: (route: R) => route.baseUrl ?? defaults.baseUrl,
    sizeFor: (route: R, asked: SizeAsked) =>
      queueMadeSize(route.sizeInput ?? defaults.sizeInput, asked, {
        pixelRange: route.pixelRange ?? defaults.pixelRange,
        aspectRatios: route.aspectRatios ?? defaults.aspectRatios,
        ratioArea: ratioArea(asked),
      }),
  };
}

/** The settings schema of a queue type: the upstream ones (spec 1), then polling, sizes, references, extra input. */
export function queueSettings(
  defaults: QueueTypeDefaults,
  opts: { modelExample: string; sizeInputs: readonly string[]; pricing: TypePricing },
): RouteSetting[] {
  const shared = upstreamSettings({ defaultBaseUrl: defaults.baseUrl, keyVariable: defaults.apiKeyEnv, modelExample: opts.modelExample });
  const field = (v: unknown) => (typeof v === 'string' && /^[a-z_]+$/.test(v) ? null : 'invalid');
  return [
    shared.baseUrl,
    shared.model,
    shared.apiKeyEnv,
    shared.timeoutMs,
    shared.maxConcurrency,
    shared.ratePerMinute,
    costSetting({ bySize: false }),
    priceSetting(opts.pricing),
    {
      name: 'pollIntervalMs',
      required: false,
      default: DEFAULT_POLL_INTERVAL_MS,
      description: 'Between two polls of one request, in ms (at least 100); a waiting task holds no worker meanwhile',
      check: (v) => (Number.isInteger(v) && (v as number) >= 100 ? null : 'out_of_range'),
    },
    {
      name: 'maxWaitMs',
      required: false,
      default: DEFAULT_MAX_WAIT_MS,
      description: 'The longest a request may wait upstream before the task fails and is refunded (never submitted again)',
      check: checks.positiveInteger,
    },
    {
      name: 'onUnknownSubmit',
      required: false,
      default: DEFAULT_ON_UNKNOWN_SUBMIT,
      description:
        'A submit a crash left without its answer, where the upstream gives no way to find the request again: "resubmit" (the task gets its image; the upstream may bill twice) or "fail" (the task fails and is refunded; the upstream may bill an image nobody gets). Types that can look a request up do so first.',
      check: (v) => (v === 'resubmit' || v === 'fail' ? null : 'invalid'),
    },
    {
      name: 'sizeInput',
      required: false,
      default: defaults.sizeInput,
      description: `How the upstream model takes its size: ${opts.sizeInputs.join(' or ')}`,
      check: (v) => (typeof v === 'string' && opts.sizeInputs.includes(v) ? null : 'invalid'),
    },
    {
      name: 'pixelRange',
      required: false,
      description: 'For pixel sizes: { min, max, multiple } of each side (the nearest legal size keeps the ratio)',
      check: (v) => {
        const r = v as PixelRange;
        return r && [r.min, r.max, r.multiple].every((n) => Number.isInteger(n) && n >= 1) && r.min <= r.max ? null : 'invalid';
      },
    },
    {
      name: 'aspectRatios',
      required: false,
      description: 'For aspect_ratio: the ratios ("w:h") the model takes; the nearest is sent',
      // The one ratio grammar requests and the catalog use (@app/geometry).
      check: (v) => (Array.isArray(v) && v.length > 0 && v.every(isAspectRatio) ? null : 'invalid'),
    },
    {
      name: 'referenceInput',
      required: false,
      default: defaults.referenceInput,
      description: 'The input field taking reference images',
      check: field,
    },
    {
      name: 'input',
      required: false,
      description: "Extra input fields sent as they are (the upstream model's own options)",
      check: (v) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? null : 'not_an_object'),
    },
  ];
}

/** Kiln's size a route's upstream makes: the nearest legal pixel size, or the nearest ratio at about `area` pixels. */
export function queueMadeSize(
  sizeInput: string,
  asked: { width: number; height: number },
  opts: { pixelRange: PixelRange; aspectRatios: readonly string[]; ratioArea: number },
): { width: number; height: number } {
  if (sizeInput === 'aspect_ratio') {
    const { w, h } = parseAspectRatio(nearestRatio(asked.width, asked.height, opts.aspectRatios))!;
    const width = Math.round(Math.sqrt((opts.ratioArea * w) / h) / 16) * 16;
    return { width, height: Math.round((width * h) / w / 16) * 16 };
  }
  return fitPixels(asked.width, asked.height, opts.pixelRange);
}
