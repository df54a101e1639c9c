import * as http from 'node:http';
import * as https from 'node:https';
import { abortReason } from '@app/errors';
import { EgressError } from './egress.errors';
import {
  checkEgressTarget,
  EgressPolicy,
  formatBytes,
  formatSeconds,
  hostOf,
  pinnedLookup,
  ResolveHost,
  systemCode,
} from './egress-request';

export interface EgressStreamOptions {
  policy: EgressPolicy;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  /** Lookup, connect and the answer's status line and headers. */
  timeoutMs: number;
  /**
   * Once the body flows: the longest wait for the next chunk while the reader waits for it
   * (a reader busy with the last chunk never times the upstream out). Default timeoutMs.
   */
  idleTimeoutMs?: number;
  /** The longest body read in all; past it the stream fails with too_large. */
  maxBytes: number;
  signal?: AbortSignal;
  resolve?: ResolveHost;
}

/**
 * An answer whose body is read as it arrives (an upstream batch's output file, possibly
 * gigabytes). `chunks` may be iterated once; `close` frees the connection when the reader
 * stops early. `text` reads a small body whole (an error answer), at most `max` bytes.
 */
export interface EgressStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  chunks(): AsyncGenerator<Buffer>;
  text(max: number): Promise<string>;
  close(): void;
}

/**
 * egressRequest's checks (the policy, the one checked address, no redirect, time and byte
 * bounds) for a body that must not be buffered whole: the answer resolves once its headers
 * arrived, and the body is pulled chunk by chunk, so the reader's pace (backpressure) decides
 * how much sits in memory.
 */
export async function egressStream(rawUrl: string, options: EgressStreamOptions): Promise<EgressStream> {
  options.signal?.throwIfAborted();
  const controller = new AbortController();
  const timer = setTimeout(
    () => controller.abort(new EgressError('timeout', `No answer within ${formatSeconds(options.timeoutMs)}`)),
    options.timeoutMs,
  );
  const onCallerAbort = (): void => controller.abort(options.signal!.reason);
  options.signal?.addEventListener('abort', onCallerAbort, { once: true });
  let res: http.IncomingMessage;
  let req: http.ClientRequest;
  try {
    const target = await checkEgressTarget(rawUrl, options.policy, { resolve: options.resolve, signal: controller.signal });
    ({ req, res } = await open(target, options, controller.signal));
  } finally {
    clearTimeout(timer);
    options.signal?.removeEventListener('abort', onCallerAbort);
  }
  const close = (): void => {
    res.destroy();
    req.destroy();
  };
  const idleMs = options.idleTimeoutMs ?? options.timeoutMs;
  let used = false;
  async function* chunks(): AsyncGenerator<Buffer> {
    if (used) throw new Error('egressStream: the body was already read');
    used = true;
    const it = res[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    let size = 0;
    try {
      for (;;) {
        const next = await nextWithin(it, idleMs, options.signal, close);
        if (next.done) return;
        size += next.value.length;
        if (size > options.maxBytes) throw new EgressError('too_large', `The answer is larger than ${formatBytes(options.maxBytes)}`);
        yield next.value;
      }
    } finally {
      close();
    }
  }
  async function text(max: number): Promise<string> {
    const parts: Buffer[] = [];
    let size = 0;
    for await (const chunk of chunks()) {
      size += chunk.length;
      if (size > max) break;
      parts.push(chunk);
    }
    return Buffer.concat(parts).toString('utf8');
  }
  return { status: res.statusCode ?? 0, headers: res.headers, chunks, text, close };
}

/** The next chunk, or a timeout / the caller's abort (the connection then closed). */
async function nextWithin(
  it: AsyncIterator<Buffer>,
  ms: number,
  signal: AbortSignal | undefined,
  close: () => void,
): Promise<IteratorResult<Buffer>> {
  signal?.throwIfAborted();
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => {
      close();
      reject(new EgressError('timeout', `No data for ${formatSeconds(ms)}`));
    }, ms);
    onAbort = () => {
      close();
      reject(abortReason(signal!));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([
      it.next().catch((err: unknown) => {
        if (signal?.aborted) throw signal.reason;
        throw err instanceof EgressError ? err : new EgressError('network', 'The connection closed before the answer was complete');
      }),
      stop,
    ]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
    stop.catch(() => undefined);
  }
}

function open(
  target: { url: URL; address: string; family: 4 | 6 },
  options: EgressStreamOptions,
  signal: AbortSignal,
): Promise<{ req: http.ClientRequest; res: http.IncomingMessage }> {
  signal.throwIfAborted();
  const { url } = target;
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    let settled = false;
    const req = client.request({
      protocol: url.protocol,
      hostname: hostOf(url),
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method: options.method ?? 'GET',
      headers: options.headers,
      lookup: pinnedLookup(target),
      agent: false,
    });
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      req.destroy();
      reject(
        signal.aborted
          ? abortReason(signal)
          : err instanceof EgressError
            ? err
            : new EgressError('network', 'The connection failed', { code: systemCode(err) }),
      );
    };
    const onAbort = (): void => fail(abortReason(signal));
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', fail);
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) {
        res.resume();
        return fail(new EgressError('redirect', `Redirects are not followed (${status})`));
      }
      const declared = Number(res.headers['content-length']);
      if (Number.isFinite(declared) && declared > options.maxBytes) {
        res.resume();
        return fail(new EgressError('too_large', `The answer is larger than ${formatBytes(options.maxBytes)}`));
      }
      settled = true;
      signal.removeEventListener('abort', onAbort);
      // Errors after this point surface through the reader's iteration.
      req.removeListener('error', fail);
      req.on('error', () => undefined);
      resolve({ req, res });
    });
    req.end();
  });
}
