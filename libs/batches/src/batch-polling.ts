import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { BATCH_DONE_SQL, isUuid, PreparedStatement, queryPrepared } from '@app/database';
import { notFound } from '@app/errors';
import { stampStage } from '@app/metrics';
import { BatchView } from '@app/tasks';
import { BatchesService, BatchTask } from './batches.service';
import { BatchWatcher } from './batch-watcher';

/** Longest `Prefer: wait` honoured, in seconds; a larger one is cut to it. */
export const MAX_WAIT_SECONDS = 60;
/** Held polls and progress streams one holder (an API key, a dashboard session) may have at once, per api process. */
export const MAX_HELD_PER_HOLDER = 20;
/** Without Redis announcements, how often a held poll re-reads its batch's version. */
const FALLBACK_POLL_MS = 1000;

/** What a poll of GET /v1/batches/{id} answers. */
export type PollAnswer =
  | { notModified: true; etag: string; waitApplied: number | null }
  | { notModified: false; etag: string; waitApplied: number | null; detail: { batch: BatchView; tasks: BatchTask[] } };

export interface PollRequest {
  accountId: string;
  batchId: string;
  /** The If-None-Match header, if any. */
  ifNoneMatch: string | undefined;
  /** Seconds from `Prefer: wait=N` (1..60), or null. */
  waitSeconds: number | null;
  /** Who the held-poll cap counts against: `key:<id>` or `session:<id>`. */
  holder: string;
  /** Aborted when the client goes away: a held poll stops waiting. */
  signal?: AbortSignal;
}

/** The ETag of a batch at a version: weak, since the body is JSON re-encoded on every read. */
export function batchEtag(batchId: string, version: number): string {
  return `W/"${batchId}-${version}"`;
}

/** Weak comparison (RFC 9110 13.1.2) of an If-None-Match list against one ETag. */
export function etagMatches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  return ifNoneMatch.split(',').some((tag) => tag.trim() === '*' || opaque(tag) === opaque(etag));
}

/** `Prefer: wait=N` (RFC 7240) as seconds, cut to MAX_WAIT_SECONDS; null when absent or not positive. */
export function preferredWait(prefer: string | string[] | undefined): number | null {
  const value = Array.isArray(prefer) ? prefer.join(',') : prefer;
  const m = value ? /(?:^|[,;\s])wait\s*=\s*"?(\d{1,9})"?/i.exec(value) : null;
  const n = m ? Number(m[1]) : 0;
  return n >= 1 ? Math.min(n, MAX_WAIT_SECONDS) : null;
}

/** A conditional poll's one read: the batch's version and doneness, on the caller's account. */
const BATCH_HEAD: PreparedStatement = {
  name: 'kiln_batch_head',
  text: `SELECT version, ${BATCH_DONE_SQL} AS done FROM batches WHERE id = $1 AND account_id = $2`,
};

/**
 * Conditional and long polling of a batch. The ETag is the batch row's version, which every
 * write that changes the response bumps in its own statement, so a conditional poll costs
 * one primary-key row read and no task read. A held poll (`Prefer: wait`) waits for the
 * batch's announcement on Redis (BatchWatcher) holding no database connection, re-reads the
 * version when woken, and answers with the new body once it moved; without Redis it re-reads
 * every second instead. It never waits past its deadline.
 */
@Injectable()
export class BatchPolling {
  private readonly held = new Map<string, number>();
  /** Body reads in flight per account and batch, shared by the held polls one change wakes. */
  private readonly reads = new Map<string, { startedAt: number; read: Promise<{ batch: BatchView; tasks: BatchTask[] }> }>();
  /** Version reads in flight per account and batch, shared by the polls re-reading without Redis. */
  private readonly heads = new Map<string, { startedAt: number; read: Promise<{ version: number; done: boolean }> }>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly batches: BatchesService,
    private readonly watcher: BatchWatcher,
  ) {}

  /** Held polls right now, per holder (for tests and metrics). */
  heldBy(holder: string): number {
    return this.held.get(holder) ?? 0;
  }

  async poll(req: PollRequest): Promise<PollAnswer> {
    if (!isUuid(req.batchId)) throw notFound('Batch');
    if (req.waitSeconds === null || !this.take(req.holder)) return this.answerNow(req, null);
    try {
      return await this.hold(req, req.waitSeconds);
    } finally {
      this.give(req.holder);
    }
  }

  /** The version and doneness of the account's batch: the one row a conditional poll reads. */
  private async head(accountId: string, batchId: string): Promise<{ version: number; done: boolean }> {
    const [row] = await queryPrepared<{ version: string; done: boolean }>(this.db, BATCH_HEAD, [batchId, accountId]);
    if (!row) throw notFound('Batch');
    return { version: Number(row.version), done: row.done };
  }

  private async answerNow(req: PollRequest, waitApplied: number | null): Promise<PollAnswer> {
    if (req.ifNoneMatch) {
      const { version } = await this.head(req.accountId, req.batchId);
      const etag = batchEtag(req.batchId, version);
      if (etagMatches(req.ifNoneMatch, etag)) return { notModified: true, etag, waitApplied };
    }
    return this.full(req, waitApplied);
  }

  /**
   * The body and its ETag. The version is read with the batch row, before the tasks: a task
   * write landing between the two reads shows in the body under the older ETag, so the next
   * conditional poll answers 200 once more; the reverse (a newer ETag over an older body,
   * which would hide a change) cannot happen.
   */
  private async full(req: PollRequest, waitApplied: number | null): Promise<PollAnswer> {
    const detail = await this.batches.detail(req.accountId, req.batchId);
    return { notModified: false, etag: batchEtag(req.batchId, detail.batch.version), waitApplied, detail };
  }

  private async hold(req: PollRequest, waitSeconds: number): Promise<PollAnswer> {
    const deadline = Date.now() + waitSeconds * 1000;
    // Subscribed before the version is read, so a change committed after the read is announced to it.
    const watch = await this.watcher.watch(req.batchId, waitSeconds * 1000);
    const stopWatching = (): void => watch?.close();
    req.signal?.addEventListener('abort', stopWatching, { once: true });
    try {
      const start = await this.head(req.accountId, req.batchId);
      const clientHasCurrent = req.ifNoneMatch ? etagMatches(req.ifNoneMatch, batchEtag(req.batchId, start.version)) : null;
      // A done batch, or a client whose copy is already stale, is answered at once.
      if (start.done || clientHasCurrent === false) return this.answerNow(req, waitSeconds);
      for (;;) {
        const remaining = deadline - Date.now();
        if (remaining <= 0 || req.signal?.aborted) break;
        const sleptFrom = performance.now();
        const announcedAt = watch?.live ? await watch.next(remaining) : null;
        if (announcedAt === null && !watch?.live) await sleep(Math.min(FALLBACK_POLL_MS, remaining), req.signal);
        if (req.signal?.aborted) break;
        if (announcedAt !== null) {
          stampStage(req.batchId, 'woken', performance.timeOrigin + announcedAt);
          // Every poll the change woke answers from one read of the body made after it.
          const detail = await this.readAfter(req, announcedAt);
          if (detail.batch.version !== start.version) {
            return { notModified: false, etag: batchEtag(req.batchId, detail.batch.version), waitApplied: waitSeconds, detail };
          }
          continue;
        }
        const now = await this.sharedAfter(this.heads, req, sleptFrom, () => this.head(req.accountId, req.batchId));
        if (now.version !== start.version) return this.full(req, waitSeconds);
      }
      // A client that left gets nothing; no need to read a body for it.
      return req.ifNoneMatch || req.signal?.aborted
        ? { notModified: true, etag: batchEtag(req.batchId, start.version), waitApplied: waitSeconds }
        : this.full(req, waitSeconds);
    } finally {
      req.signal?.removeEventListener('abort', stopWatching);
      watch?.close();
    }
  }

  /**
   * The batch's detail as read after `since` (performance.now()): a read already in flight
   * that started after it is shared, so a thousand polls woken by one announcement cost one
   * read, not a thousand. The polls of one account only share reads of its own batches.
   */
  private readAfter(req: PollRequest, since: number): Promise<{ batch: BatchView; tasks: BatchTask[] }> {
    return this.sharedAfter(this.reads, req, since, () => this.batches.detail(req.accountId, req.batchId));
  }

  /**
   * A read of the account's batch started after `since`: the one in flight if it did, else a
   * new one. Without Redis, a thousand held polls re-reading every second share their reads
   * the same way, instead of queueing a thousand statements a second for the pool.
   */
  private sharedAfter<T>(
    reads: Map<string, { startedAt: number; read: Promise<T> }>,
    req: PollRequest,
    since: number,
    read: () => Promise<T>,
  ): Promise<T> {
    const key = `${req.accountId}:${req.batchId}`;
    const inFlight = reads.get(key);
    if (inFlight && inFlight.startedAt >= since) return inFlight.read;
    const entry = { startedAt: performance.now(), read: read() };
    reads.set(key, entry);
    const forget = (): void => {
      if (reads.get(key) === entry) reads.delete(key);
    };
    entry.read.then(forget, forget);
    return entry.read;
  }

  /** Takes one of the holder's held slots (held polls and progress streams share them); false when all are taken. */
  take(holder: string): boolean {
    const n = this.held.get(holder) ?? 0;
    if (n >= MAX_HELD_PER_HOLDER) return false;
    this.held.set(holder, n + 1);
    return true;
  }

  /** Gives back a slot taken with take(). */
  give(holder: string): void {
    const n = (this.held.get(holder) ?? 1) - 1;
    if (n <= 0) this.held.delete(holder);
    else this.held.set(holder, n);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
