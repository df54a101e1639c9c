import { EgressPolicy, egressRequest, egressStream, isEgressError } from '@app/egress';
import type { UpstreamErrorClassifier } from './provider-type';
import { ProviderError } from './render.types';
import { throwIfAborted } from './provider.utils';
import type { UpstreamBatchRef, UpstreamBatchResult, UpstreamBatchStatus } from './upstream-batch';
import { exchange, formatSeconds, headersOf, JSON_ENVELOPE_BYTES } from './upstream-http';

/**
 * The HTTP the upstream batch clients (each type's `<type>.batch.ts`) share: small JSON calls
 * (create, retrieve, list, cancel), an input upload, and result files read line by line as
 * they arrive. Everything goes through libs/egress (the route's policy, bounded time and
 * bytes); the key travels in a header and never into a message. Below it, the steps every
 * client takes the same way whatever the wire shapes: findBatch's walk through the list,
 * poll's answer to passing trouble, and a result line's envelope.
 */
export interface BatchHttp {
  policy: EgressPolicy;
  headers: Record<string, string>;
  apiKey: string;
  timeoutMs: number;
  classify: UpstreamErrorClassifier;
}

/**
 * Sends one call and answers its headers and text; a non-2xx answer is thrown as the type
 * classifies it. `headers` go on top of the key's (the Files API's upload protocol).
 */
export async function rawCall(
  http: BatchHttp,
  call: { method: 'GET' | 'POST'; url: string; body?: Buffer; contentType?: string; headers?: Record<string, string>; timeoutMs?: number },
  signal: AbortSignal | undefined,
): Promise<{ headers: Headers; text: string }> {
  const timeoutMs = call.timeoutMs ?? http.timeoutMs;
  const headers = { ...http.headers, ...(call.contentType ? { 'content-type': call.contentType } : {}), ...call.headers };
  const res = await exchange('api', { timeoutMs, maxImageBytes: JSON_ENVELOPE_BYTES }, signal, () =>
    egressRequest(call.url, {
      policy: http.policy,
      method: call.method,
      headers,
      body: call.body,
      maxBytes: JSON_ENVELOPE_BYTES,
      timeoutMs,
      signal,
    }),
  );
  const text = res.body.toString('utf8');
  const answerHeaders = headersOf(res);
  if (res.status < 200 || res.status >= 300)
    throw http.classify({ status: res.status, headers: answerHeaders, text }, { apiKey: http.apiKey });
  return { headers: answerHeaders, text };
}

/** Sends one call and answers its JSON; a non-2xx answer is thrown as the type classifies it. */
export async function jsonCall(
  http: BatchHttp,
  call: { method: 'GET' | 'POST'; url: string; body?: Buffer; contentType?: string; timeoutMs?: number },
  signal: AbortSignal | undefined,
): Promise<unknown> {
  const { text } = await rawCall(http, call, signal);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new ProviderError('invalid_response', 'The batch API answered with something other than JSON');
  }
}

/**
 * An upload's budget: the call's own timeout plus one second per megabyte (an input may be
 * hundreds of megabytes, which no single-call timeout of an image API allows for).
 */
export function uploadTimeoutMs(timeoutMs: number, bytes: number): number {
  return timeoutMs + Math.ceil(bytes / (1024 * 1024)) * 1000;
}

/** One line of a result file, or what could be read of one too long to keep (its first bytes). */
export type FileLine = { text: string } | { oversize: string };

/**
 * GETs a result file and yields its lines as the bytes arrive, never holding more than one
 * line (at most `maxLineBytes`) and one network chunk: a line longer than that is skipped
 * past, and only its first 4 KB are answered (enough to read its key). A stall longer than
 * the timeout while reading fails the stream (timeout); so does the caller's abort.
 */
export async function* fileLines(
  http: BatchHttp,
  url: string,
  limits: { maxLineBytes: number; maxBytes: number },
  signal: AbortSignal | undefined,
): AsyncGenerator<FileLine> {
  let stream;
  try {
    stream = await egressStream(url, {
      policy: http.policy,
      headers: http.headers,
      timeoutMs: http.timeoutMs,
      maxBytes: limits.maxBytes,
      signal,
    });
  } catch (err) {
    throw streamFailure(err, http.timeoutMs, signal);
  }
  if (stream.status < 200 || stream.status >= 300) {
    const text = await stream.text(64 * 1024).catch(() => '');
    const headers = new Headers();
    for (const [k, v] of Object.entries(stream.headers)) if (typeof v === 'string') headers.set(k, v);
    throw http.classify({ status: stream.status, headers, text }, { apiKey: http.apiKey });
  }
  const PREFIX = 4096;
  let parts: Buffer[] = [];
  let size = 0;
  let skipping: string | null = null;
  try {
    for await (const chunk of stream.chunks()) {
      let from = 0;
      for (;;) {
        const nl = chunk.indexOf(0x0a, from);
        const piece = chunk.subarray(from, nl === -1 ? chunk.length : nl);
        if (skipping === null) {
          if (size + piece.length > limits.maxLineBytes) {
            skipping = Buffer.concat([...parts, piece])
              .subarray(0, PREFIX)
              .toString('utf8');
            parts = [];
            size = 0;
          } else if (piece.length > 0) {
            parts.push(Buffer.from(piece));
            size += piece.length;
          }
        }
        if (nl === -1) break;
        if (skipping !== null) {
          yield { oversize: skipping };
          skipping = null;
        } else if (size > 0) {
          const text = Buffer.concat(parts, size).toString('utf8').trim();
          parts = [];
          size = 0;
          if (text.length > 0) yield { text };
        }
        from = nl + 1;
      }
    }
  } catch (err) {
    throw streamFailure(err, http.timeoutMs, signal);
  } finally {
    stream.close();
  }
  if (skipping !== null) yield { oversize: skipping };
  else if (size > 0) {
    const text = Buffer.concat(parts, size).toString('utf8').trim();
    if (text.length > 0) yield { text };
  }
}

function streamFailure(err: unknown, timeoutMs: number, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted) return signal.reason;
  if (!isEgressError(err)) return err;
  switch (err.reason) {
    case 'timeout':
      return new ProviderError('timeout', `The batch API's result file stalled for ${formatSeconds(timeoutMs)} (${err.message})`);
    case 'network':
    case 'unresolvable':
      return new ProviderError(
        'upstream_error',
        `Could not read the batch API's result file${err.detail.code ? ` (${err.detail.code})` : ''}`,
        { retryable: true },
      );
    case 'too_large':
      return new ProviderError('invalid_response', `The batch API's result file is too large (${err.message})`);
    case 'redirect':
      return new ProviderError('invalid_response', `The batch API answered with a redirect, which is not followed (${err.message})`);
    default:
      return new ProviderError('not_configured', `The batch API's address is refused: ${err.message}`);
  }
}

/** The value of `"<field>": "<value>"` near the start of an oversize line (its key). */
function keyIn(prefix: string, field: string): string | null {
  const m = new RegExp(`"${field}"\\s*:\\s*"([^"]{1,200})"`).exec(prefix);
  return m ? m[1] : null;
}

/** What both batch clients' configurations add to their type's. */
export interface BatchClientOptions {
  pollIntervalMs: number;
  /** findBatch looks no further back than this (default 3 days: a crash is found again long before). */
  findWindowMs?: number;
  /** For tests: the clock findBatch measures its window with. */
  now?: () => number;
}

/** Batches findBatch asks for a page, and pages it reads at most whatever the window says. */
const LIST_PAGE = 100;
const LIST_MAX_PAGES = 50;
const DEFAULT_FIND_WINDOW_MS = 3 * 24 * 3600 * 1000;

/** One page of an upstream's batch list, newest first, as findBatch reads it. */
export interface BatchListPage<T> {
  items: T[];
  /** The cursor of the next page; null when this one is the last. */
  next: string | null;
  /** When the page's last (oldest) batch was created, ms since the epoch; NaN when it does not say. */
  lastCreatedMs: number;
}

/**
 * findBatch's walk: GETs the list (`{url}?{size}=100&{cursor}=...`) a page at a time until
 * `match` finds the group's batch, or the list ends, or it reaches batches older than the
 * window (or LIST_MAX_PAGES pages). `read` takes the upstream's own list shape apart.
 */
export async function findInList<T>(
  http: BatchHttp,
  options: BatchClientOptions,
  list: {
    url: string;
    params: { size: string; cursor: string };
    read: (answer: unknown) => BatchListPage<T>;
    match: (item: T) => UpstreamBatchRef | null;
  },
  signal: AbortSignal | undefined,
): Promise<UpstreamBatchRef | null> {
  const oldest = (options.now ?? Date.now)() - (options.findWindowMs ?? DEFAULT_FIND_WINDOW_MS);
  let cursor: string | null = null;
  for (let n = 0; n < LIST_MAX_PAGES; n++) {
    throwIfAborted(signal);
    const query = `${list.params.size}=${LIST_PAGE}${cursor ? `&${list.params.cursor}=${encodeURIComponent(cursor)}` : ''}`;
    const page: BatchListPage<T> = list.read(await jsonCall(http, { method: 'GET', url: `${list.url}?${query}` }, signal));
    for (const item of page.items) {
      const ref = list.match(item);
      if (ref) return ref;
    }
    if (page.next === null) return null;
    if (page.lastCreatedMs < oldest) return null;
    cursor = page.next;
  }
  return null;
}

/** Passing trouble of a poll itself is not the batch's end: `waiting`, to ask again later. Anything else is thrown. */
export function pollTrouble(err: unknown): UpstreamBatchStatus {
  if (err instanceof ProviderError && err.retryable)
    return {
      state: 'waiting',
      upstreamStatus: `poll failed: ${err.kind}`,
      ...(err.retryAfterMs !== undefined ? { retryAfterMs: err.retryAfterMs } : {}),
    };
  throw err;
}

/** A batch not over yet, with the lines done so far when the upstream counts them. */
export function stillWaiting(upstreamStatus: string, done: number[]): UpstreamBatchStatus {
  return { state: 'waiting', upstreamStatus, ...(done.length ? { completed: done.reduce((a, b) => a + b, 0) } : {}) };
}

/**
 * A result file's lines, each as it arrives, at most as long as an image of `maxImageBytes`
 * in base64 with its JSON around it.
 */
export function resultFileLines(
  http: BatchHttp,
  url: string,
  maxImageBytes: number,
  maxLines: number,
  signal: AbortSignal | undefined,
): AsyncGenerator<FileLine> {
  const maxLineBytes = Math.ceil((maxImageBytes * 4) / 3) + JSON_ENVELOPE_BYTES;
  return fileLines(http, url, { maxLineBytes, maxBytes: maxLineBytes * maxLines }, signal);
}

/**
 * A result line's envelope, the same for every upstream: a line too long for any image Kiln
 * takes, or one that is not JSON, fails its own task when its key (`keyField`) can be read
 * and is passed over when not; a JSON line is the upstream's to read (`read`).
 */
export async function resultOfLine<L>(
  line: FileLine,
  keyField: string,
  maxImageBytes: number,
  read: (parsed: L) => Promise<UpstreamBatchResult | null>,
): Promise<UpstreamBatchResult | null> {
  if ('oversize' in line) {
    const key = keyIn(line.oversize, keyField);
    return key
      ? {
          key,
          ok: false,
          error: new ProviderError(
            'invalid_response',
            `The generated image is larger than ${Math.round(maxImageBytes / (1024 * 1024))} MB`,
          ),
        }
      : null;
  }
  let parsed: L;
  try {
    parsed = JSON.parse(line.text) as L;
  } catch {
    const key = keyIn(line.text.slice(0, 4096), keyField);
    return key
      ? { key, ok: false, error: new ProviderError('invalid_response', 'The batch API wrote a result line that is not JSON') }
      : null;
  }
  return read(parsed);
}
