import { EgressPolicy, egressRequest, egressStream, isEgressError } from '@app/egress';
import type { UpstreamErrorClassifier } from './provider-type';
import { ProviderError } from './provider.types';
import { exchange, formatSeconds, headersOf, JSON_ENVELOPE_BYTES } from './upstream-http';

/**
 * The HTTP the batch clients (openai.batch.ts, gemini.batch.ts) share: small JSON calls
 * (create, retrieve, list, cancel), an input upload, and result files read line by line as
 * they arrive. Everything goes through libs/egress (the route's policy, bounded time and
 * bytes); the key travels in a header and never into a message.
 */
export interface BatchHttp {
  policy: EgressPolicy;
  headers: Record<string, string>;
  apiKey: string;
  timeoutMs: number;
  classify: UpstreamErrorClassifier;
}

/** Sends one call and answers its JSON; a non-2xx answer is thrown as the type classifies it. */
export async function jsonCall(
  http: BatchHttp,
  call: { method: 'GET' | 'POST'; url: string; body?: Buffer; contentType?: string; timeoutMs?: number },
  signal: AbortSignal | undefined,
): Promise<unknown> {
  const timeoutMs = call.timeoutMs ?? http.timeoutMs;
  const headers = { ...http.headers, ...(call.contentType ? { 'content-type': call.contentType } : {}) };
  const res = await exchange('api', { timeoutMs, maxImageBytes: JSON_ENVELOPE_BYTES }, signal, () =>
    egressRequest(call.url, { policy: http.policy, method: call.method, headers, body: call.body, maxBytes: JSON_ENVELOPE_BYTES, timeoutMs, signal }),
  );
  const text = res.body.toString('utf8');
  if (res.status < 200 || res.status >= 300) throw http.classify({ status: res.status, headers: headersOf(res), text }, { apiKey: http.apiKey });
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
    stream = await egressStream(url, { policy: http.policy, headers: http.headers, timeoutMs: http.timeoutMs, maxBytes: limits.maxBytes, signal });
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
            skipping = Buffer.concat([...parts, piece]).subarray(0, PREFIX).toString('utf8');
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
      return new ProviderError('upstream_error', `Could not read the batch API's result file${err.detail.code ? ` (${err.detail.code})` : ''}`, { retryable: true });
    case 'too_large':
      return new ProviderError('invalid_response', `The batch API's result file is too large (${err.message})`);
    case 'redirect':
      return new ProviderError('invalid_response', `The batch API answered with a redirect, which is not followed (${err.message})`);
    default:
      return new ProviderError('not_configured', `The batch API's address is refused: ${err.message}`);
  }
}

/** The value of `"<field>": "<value>"` near the start of an oversize line (its key). */
export function keyIn(prefix: string, field: string): string | null {
  const m = new RegExp(`"${field}"\\s*:\\s*"([^"]{1,200})"`).exec(prefix);
  return m ? m[1] : null;
}
