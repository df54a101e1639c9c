import { randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import * as path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { KilnApiError, KilnConnectionError } from './errors';
import { BatchEvent, batchEvents, EventsOptions } from './events';
import { KilnHttp, retryAfter, sleep } from './http';
import type { Batch, BatchDetail, BatchPage, CreateBatchRequest, CreatedBatch, Estimate, Task } from './types';

export interface WaitOptions {
  /** Called with the batch each time it changes (and once at the start). */
  onProgress?: (detail: BatchDetail) => void;
  signal?: AbortSignal;
  /** Give up after this long with a `wait_timeout` KilnApiError; default: wait as long as it takes. */
  timeoutMs?: number;
}

export interface DownloadedFile {
  task: Task;
  path: string;
  /** The file was already there, complete, from an earlier download. */
  skipped: boolean;
}

export interface DownloadOptions {
  signal?: AbortSignal;
  /** Called after each file is written or found complete. */
  onFile?: (file: DownloadedFile) => void;
  /** Files fetched at once (default 4). */
  concurrency?: number;
  /** Download from this detail instead of fetching the batch again. */
  detail?: BatchDetail;
}

/** How long the server may hold one poll (it allows 1..60 s). */
const HOLD_SECONDS = 30;
/** Between polls when the server does not hold them (no long polling on its side). */
const POLL_FALLBACK_MS = 1000;
/** A whole image download, however large. */
const FILE_TIMEOUT_MS = 10 * 60_000;

/** Batches of images: create, price, follow, cancel and fetch (`/v1/batches`). */
export class BatchesResource {
  constructor(private readonly http: KilnHttp) {}

  /**
   * Creates a batch (charged at once). The request carries an Idempotency-Key, generated when
   * none is given and the same on every retry of this call, so a create whose answer was lost
   * is answered from the server's memory instead of charging again. Pass your own key to make
   * a create safe across processes (a re-run after a crash).
   */
  async create(body: CreateBatchRequest, options: { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<CreatedBatch> {
    const key = options.idempotencyKey ?? randomUUID();
    const res = await this.http.json<CreatedBatch>('POST', '/v1/batches', {
      body,
      headers: { 'Idempotency-Key': key },
      repeatable: true,
      signal: options.signal,
    });
    return res.body;
  }

  /** What a create of this body would cost and whether it would go through now; charges nothing. */
  async estimate(body: CreateBatchRequest): Promise<Estimate> {
    return (await this.http.json<Estimate>('POST', '/v1/batches/estimate', { body, repeatable: true })).body;
  }

  async get(id: string, options: { signal?: AbortSignal } = {}): Promise<BatchDetail> {
    return (await this.http.json<BatchDetail>('GET', `/v1/batches/${encodeURIComponent(id)}`, { repeatable: true, signal: options.signal }))
      .body;
  }

  /** Every batch of the account, newest first, fetching pages as the loop goes. */
  async *list(options: { pageSize?: number } = {}): AsyncGenerator<Batch> {
    let cursor: string | undefined;
    do {
      const page = await this.http.json<BatchPage>('GET', '/v1/batches', { query: { limit: options.pageSize, cursor }, repeatable: true });
      yield* page.body.batches;
      cursor = page.body.nextCursor ?? undefined;
    } while (cursor);
  }

  /**
   * Resolves with the batch once it is done. Each poll sends the last ETag with
   * `Prefer: wait=N`, so the server answers as soon as something changes (or 304 after N
   * seconds): progress arrives at once, and an idle batch costs one request per N seconds.
   * Against a server without long polling it polls once a second instead.
   */
  async wait(id: string, options: WaitOptions = {}): Promise<BatchDetail> {
    const deadline = options.timeoutMs === undefined ? Infinity : Date.now() + options.timeoutMs;
    let etag: string | undefined;
    let seen: string | undefined;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new KilnApiError('wait_timeout', `Batch ${id} was not done within ${options.timeoutMs} ms`, 0, { batchId: id }, undefined);
      const hold = Math.max(1, Math.min(HOLD_SECONDS, Math.floor(left / 1000)));
      const headers: Record<string, string> = { Prefer: `wait=${hold}` };
      if (etag) headers['If-None-Match'] = etag;
      const res = await this.http.send('GET', `/v1/batches/${encodeURIComponent(id)}`, {
        headers,
        accept: [304],
        repeatable: true,
        signal: options.signal,
        extraTimeoutMs: hold * 1000,
      });
      const held = res.headers.has('preference-applied');
      if (res.status === 304) {
        await res.body?.cancel();
      } else {
        const detail = (await res.json()) as BatchDetail;
        etag = res.headers.get('etag') ?? undefined;
        // Without ETags every poll answers 200: report only real changes.
        const signature = etag ?? JSON.stringify(detail);
        if (signature !== seen) {
          seen = signature;
          options.onProgress?.(detail);
        }
        if (detail.batch.done) return detail;
      }
      if (!held) await sleep(Math.min(POLL_FALLBACK_MS, Math.max(0, deadline - Date.now())), options.signal);
    }
  }

  /**
   * The batch's progress as it happens (Server-Sent Events): a `task` event as each task
   * finishes and a `batch` event when the counts change, ending after the one that says done.
   * Reconnects with Last-Event-ID when the connection drops, so no task event is lost or
   * repeated. A Kiln without the stream answers 404: fall back to wait().
   */
  events(id: string, options: EventsOptions = {}): AsyncGenerator<BatchEvent> {
    return batchEvents(this.http, id, options);
  }

  /** Stops what has not started; refunds it. Answers the batch as it is after the cancel. */
  async cancel(id: string): Promise<Batch> {
    return (await this.http.json<Batch>('POST', `/v1/batches/${encodeURIComponent(id)}/cancel`, { repeatable: true })).body;
  }

  /** The batch as a zip (manifest.json and images/), streamed: pipe it to a file. */
  async archive(id: string, options: { signal?: AbortSignal } = {}): Promise<Readable> {
    const res = await this.http.send('GET', `/v1/batches/${encodeURIComponent(id)}/archive`, {
      headers: { Accept: 'application/zip' },
      repeatable: true,
      stream: true,
      signal: options.signal,
    });
    return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream);
  }

  /**
   * Writes each succeeded task's image into `dir` under its result's file name
   * (`kiln-<batch>-<index>.png`, unique across batches). Resumable: a file is written under
   * a temporary name and renamed when complete, so a file present under its own name is
   * complete and skipped. Result URLs are public: the API key is not sent with them.
   */
  async download(id: string, dir: string, options: DownloadOptions = {}): Promise<DownloadedFile[]> {
    const detail = options.detail ?? (await this.get(id, { signal: options.signal }));
    await mkdir(dir, { recursive: true });
    const todo = detail.tasks.filter((t) => t.status === 'succeeded' && t.resultUrls.length > 0);
    const done: DownloadedFile[] = [];
    let next = 0;
    const worker = async () => {
      while (next < todo.length) {
        const task = todo[next++];
        const file = path.join(dir, resultFileName(task));
        const skipped = await exists(file);
        if (!skipped) await this.fetchFile(task.resultUrls[0], file, options.signal);
        const entry = { task, path: file, skipped };
        done.push(entry);
        options.onFile?.(entry);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 4) }, worker));
    return done.sort((a, b) => a.path.localeCompare(b.path));
  }

  private async fetchFile(url: string, file: string, signal?: AbortSignal): Promise<void> {
    const { fetch: fetchImpl, maxRetries } = this.http.options;
    const part = `${file}.part`;
    for (let attempt = 0; ; attempt++) {
      try {
        const res = await fetchImpl(url, {
          redirect: 'follow',
          signal: AbortSignal.any([AbortSignal.timeout(FILE_TIMEOUT_MS), ...(signal ? [signal] : [])]),
        });
        if (!res.ok || !res.body) {
          await res.body?.cancel();
          const retryable = res.status === 429 || res.status >= 500;
          if (retryable && attempt < maxRetries) {
            await sleep(retryAfter(res.headers) ?? 500 * 2 ** attempt, signal);
            continue;
          }
          throw new KilnApiError(
            'download_failed',
            `GET ${url} answered ${res.status}`,
            res.status,
            { url },
            res.headers.get('x-request-id') ?? undefined,
          );
        }
        await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), createWriteStream(part));
        await rename(part, file);
        return;
      } catch (err) {
        await rm(part, { force: true });
        if (err instanceof KilnApiError || signal?.aborted) throw err;
        if (attempt >= maxRetries) throw new KilnConnectionError(`GET ${url}: ${(err as Error).message}`, err);
        await sleep(500 * 2 ** attempt, signal);
      }
    }
  }
}

/** The last segment of the task's result URL, made safe as a file name. */
export function resultFileName(task: Task): string {
  const last = decodeURIComponent(new URL(task.resultUrls[0]).pathname.split('/').pop() ?? '');
  const safe = last.replace(/[^A-Za-z0-9._-]/g, '_').replace(/^\.+/, '');
  return safe || `${task.id}.png`;
}

async function exists(file: string): Promise<boolean> {
  return stat(file).then(
    (s) => s.isFile(),
    () => false,
  );
}
