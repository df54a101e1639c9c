import { ProviderError, RenderRequest, RenderResult } from '../provider.types';
import { sleep, throwIfAborted } from '../provider.utils';
import { DEFAULT_MAX_WAIT_MS, DEFAULT_POLL_INTERVAL_MS, UpstreamPoll, UpstreamSubmission } from './queue-provider';
import { UpstreamHttp } from './upstream-http';

/** Settings every queue type's route has (spec: extensions v1.2, section 1). */
export interface QueueRouteSettings {
  /** The upstream model id (fal `fal-ai/flux/schnell`, Replicate `owner/name`, BFL `flux-pro-1.1`). */
  model: string;
  /** Defaulted per type; https and public unless UPSTREAM_ALLOW_PRIVATE. */
  baseUrl?: string;
  /** The variable holding the key (defaulted per type: FAL_KEY, REPLICATE_API_TOKEN, BFL_API_KEY; each may come from `<NAME>_FILE`). */
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
}

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
  protected readonly http: UpstreamHttp;

  protected constructor(label: string, defaultBaseUrl: string, route: QueueRouteSettings, deps: QueueProviderDeps) {
    this.pollIntervalMs = route.pollIntervalMs ?? DEFAULT_POLL_INTERVAL_MS;
    this.maxWaitMs = route.maxWaitMs ?? DEFAULT_MAX_WAIT_MS;
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
  abstract poll(submission: UpstreamSubmission, signal?: AbortSignal): Promise<UpstreamPoll>;

  fetchImage(imageUrl: string, signal?: AbortSignal): Promise<RenderResult> {
    return this.http.image(imageUrl, signal);
  }

  /** Submit, poll, fetch in one call (the generator instead records the submission and frees its worker). */
  async render(req: RenderRequest): Promise<RenderResult> {
    const submission = await this.submit(req);
    const deadline = Date.now() + this.maxWaitMs;
    for (;;) {
      throwIfAborted(req.signal);
      if (Date.now() > deadline) throw new ProviderError('timeout', `${this.http.label} did not make the image within ${this.maxWaitMs} ms`, { retryable: false });
      const polled = await this.poll(submission, req.signal);
      if (polled.state === 'done') return this.fetchImage(polled.imageUrl, req.signal);
      if (polled.state === 'failed') throw polled.error;
      await sleep(Math.max(this.pollIntervalMs, polled.retryAfterMs ?? 0), req.signal);
    }
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

/** Validation shared by the queue types' settings; returns the first problem as [field, reason]. */
export function queueRouteProblem(route: Record<string, unknown>): [string, string] | null {
  if (typeof route.model !== 'string' || route.model.trim().length === 0) return ['model', 'required'];
  if (route.baseUrl !== undefined && (typeof route.baseUrl !== 'string' || !/^https?:\/\/\S+$/.test(route.baseUrl))) return ['baseUrl', 'not_a_url'];
  if (route.apiKeyEnv !== undefined && (typeof route.apiKeyEnv !== 'string' || !/^[A-Z][A-Z0-9_]*$/.test(route.apiKeyEnv))) return ['apiKeyEnv', 'invalid'];
  for (const field of ['timeoutMs', 'pollIntervalMs', 'maxWaitMs'] as const) {
    const v = route[field];
    if (v !== undefined && (!Number.isInteger(v) || (v as number) < 1)) return [field, 'invalid'];
  }
  if (route.pollIntervalMs !== undefined && (route.pollIntervalMs as number) < 100) return ['pollIntervalMs', 'out_of_range'];
  if (route.input !== undefined && (typeof route.input !== 'object' || route.input === null || Array.isArray(route.input))) return ['input', 'not_an_object'];
  return null;
}
