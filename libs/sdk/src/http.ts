import { KilnApiError, KilnConnectionError } from './errors';

export interface HttpOptions {
  baseUrl: string;
  /** Sent as `Authorization: Bearer`: an API key, or a dashboard session token. */
  token: string | undefined;
  /** The TypeError a request needing `token` throws, unsent, when there is none. */
  missingToken: string;
  maxRetries: number;
  timeoutMs: number;
  userAgent: string;
  fetch: typeof fetch;
}

export interface RequestOptions {
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  form?: FormData;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /**
   * Whether sending the request twice is harmless (a read, or a write made idempotent by a key).
   * Only then are 5xx answers and dropped connections retried; otherwise only answers that say
   * nothing was done (429, 503).
   */
  repeatable?: boolean;
  /** Statuses that are answers, not errors (e.g. 304). */
  accept?: number[];
  /** The route takes no credential (login): no Authorization header. */
  anonymous?: boolean;
  /** Added to the timeout (a long poll holds the answer on purpose). */
  extraTimeoutMs?: number;
  /** The body is streamed by the caller: the timeout covers the wait for the headers only. */
  stream?: boolean;
}

export interface HttpResponse<T> {
  status: number;
  headers: Headers;
  body: T;
}

const RETRY_BASE_MS = 500;
const RETRY_CAP_MS = 30_000;
/** A Retry-After beyond this is not believed: a client should not hang for an hour. */
const RETRY_AFTER_CAP_MS = 120_000;

/** fetch with Kiln's authentication, error object, timeouts and retries. */
export class KilnHttp {
  constructor(readonly options: HttpOptions) {}

  async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<HttpResponse<T>> {
    const res = await this.send(method, path, opts);
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: (text ? JSON.parse(text) : undefined) as T };
  }

  /** The raw answer of a successful request (the caller reads its body, e.g. as a stream). */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const url = new URL(path.replace(/^\//, ''), this.options.baseUrl.replace(/\/?$/, '/'));
    for (const [k, v] of Object.entries(opts.query ?? {})) if (v !== undefined) url.searchParams.set(k, String(v));
    const headers: Record<string, string> = {
      'User-Agent': this.options.userAgent,
      Accept: 'application/json',
      ...opts.headers,
    };
    if (!opts.anonymous) {
      if (!this.options.token) throw new TypeError(this.options.missingToken);
      headers.Authorization = `Bearer ${this.options.token}`;
    }
    if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
    const body = opts.form ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));

    for (let attempt = 0; ; attempt++) {
      opts.signal?.throwIfAborted();
      const canRetry = attempt < this.options.maxRetries;
      let res: Response;
      const deadline = new AbortController();
      const timer = setTimeout(
        () => deadline.abort(new DOMException('no answer in time', 'TimeoutError')),
        this.options.timeoutMs + (opts.extraTimeoutMs ?? 0),
      );
      timer.unref?.();
      try {
        res = await this.options.fetch(url, { method, headers, body, redirect: 'error', signal: anySignal(opts.signal, deadline.signal) });
        if (opts.stream) clearTimeout(timer);
      } catch (err) {
        clearTimeout(timer);
        if (opts.signal?.aborted) throw opts.signal.reason ?? err;
        // A request that may have reached the server is repeated only when that is harmless;
        // a refused connection certainly did not.
        if (canRetry && (opts.repeatable || isConnectionRefused(err))) {
          await sleep(backoff(attempt), opts.signal);
          continue;
        }
        throw new KilnConnectionError(`${method} ${url.pathname}: ${describe(err)}`, err);
      }
      if (res.ok || opts.accept?.includes(res.status)) return res;

      const error = await toApiError(res);
      if (canRetry && isRetryable(res.status, error.code, opts.repeatable ?? false)) {
        await res.body?.cancel().catch(() => undefined);
        await sleep(retryAfter(res.headers) ?? backoff(attempt), opts.signal);
        continue;
      }
      throw error;
    }
  }
}

function isRetryable(status: number, code: string, repeatable: boolean): boolean {
  if (status === 429 || status === 503) return true;
  // The same idempotency key while its first request still runs: the server says when to ask again.
  if (status === 409 && code === 'idempotency_key_in_use') return true;
  return repeatable && status >= 500;
}

async function toApiError(res: Response): Promise<KilnApiError> {
  const requestId = res.headers.get('x-request-id') ?? undefined;
  const text = await res.text().catch(() => '');
  try {
    const { error } = JSON.parse(text) as { error: { code: string; message: string; details?: Record<string, unknown> } };
    if (typeof error?.code === 'string') return new KilnApiError(error.code, error.message, res.status, error.details, requestId);
  } catch {
    // Not Kiln's error object (a proxy's page): described below.
  }
  return new KilnApiError(
    res.status >= 500 ? 'internal_error' : 'http_error',
    `HTTP ${res.status}: ${text.slice(0, 200)}`,
    res.status,
    undefined,
    requestId,
  );
}

/** Retry-After in milliseconds (seconds or an HTTP date), or undefined. */
export function retryAfter(headers: Headers): number | undefined {
  const value = headers.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - Date.now();
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), RETRY_AFTER_CAP_MS) : undefined;
}

/** Exponential with full jitter, so many clients refused together do not come back together. */
function backoff(attempt: number): number {
  return Math.random() * Math.min(RETRY_CAP_MS, RETRY_BASE_MS * 2 ** (attempt + 1));
}

function isConnectionRefused(err: unknown): boolean {
  const cause = (err as { cause?: { code?: string } })?.cause;
  return cause?.code === 'ECONNREFUSED';
}

function describe(err: unknown): string {
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'no answer in time';
  return e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // The caller's own reason, whatever it aborted with, as fetch rejects.
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      // The caller's own reason, as above.
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function anySignal(...signals: (AbortSignal | undefined)[]): AbortSignal {
  return AbortSignal.any(signals.filter((s): s is AbortSignal => s !== undefined));
}
