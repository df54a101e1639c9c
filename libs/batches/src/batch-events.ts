import { setMaxListeners } from 'node:events';
import { Injectable, OnModuleDestroy } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { isUuid, PreparedStatement, queryPrepared } from '@app/database';
import { ErrorCode, KilnError, notFound } from '@app/errors';
import { BatchView, countTasksByBatch, emptyCounts, TASK_TIMES_SQL, TaskView, toBatchView } from '@app/tasks';
import { MAX_IMAGES_PER_BATCH } from '@app/catalog';
import { BatchTask } from './batches.service';
import { selectBatchFields } from './batch-reads';
import { EventCursor } from './batch-event-cursor';
import { BatchPolling, MAX_HELD_PER_HOLDER } from './batch-polling';
import { BatchWatch, BatchWatcher } from './batch-watcher';
import { taskPosition } from './fan-out';

/** Finished tasks one read returns at most: a change costs a page, never the whole batch. */
export const EVENT_PAGE_SIZE = 500;
/** With Redis, how long a stream trusts announcements before re-reading its batch's version anyway (a lost one only delays). */
const ANNOUNCED_RECHECK_MS = 30_000;
/** Without Redis, how often a stream re-reads its batch's version: the slow fallback. */
const FALLBACK_POLL_MS = 2000;
/** Finished tasks a stream may have waiting from the shared reads before it drops them and reads for itself (its memory bound). */
const MAX_PENDING_TASKS = 2 * EVENT_PAGE_SIZE;

/** One event of a progress stream, with the id a client resumes from. */
export type BatchEvent = { id: string; type: 'task'; task: BatchTask } | { id: string; type: 'batch'; batch: BatchView };

export interface EventStreamRequest {
  accountId: string;
  batchId: string;
  /** Who the cap counts against, as for held polls: `key:<id>` or `session:<id>`. */
  holder: string;
  /** The Last-Event-ID header, if any. */
  lastEventId: string | undefined;
  /** Aborted when the client goes away. */
  signal: AbortSignal;
}

/** A terminal task's wire columns: a finished task's status is shown as stored. */
const SELECT_FINISHED_TASKS: PreparedStatement = {
  name: 'kiln_select_finished_tasks_v3',
  text: `SELECT id, batch_id AS "batchId", seq, prompt, status, progress, result_url AS "resultUrl", error,
                error_code AS "errorCode", result_width AS "resultWidth", result_height AS "resultHeight",
                ${TASK_TIMES_SQL}
           FROM tasks
          WHERE batch_id = $1 AND status IN ('succeeded', 'failed', 'cancelled') AND seq >= $2
            AND NOT EXISTS (SELECT 1 FROM unnest($3::int[], $4::int[]) AS seen(lo, hi) WHERE seq BETWEEN seen.lo AND seen.hi)
          ORDER BY seq
          LIMIT $5`,
};

/** The positions of a batch's finished tasks: where a shared reader starts. */
const SELECT_FINISHED_SEQS: PreparedStatement = {
  name: 'kiln_select_finished_seqs',
  text: `SELECT seq FROM tasks WHERE batch_id = $1 AND status IN ('succeeded', 'failed', 'cancelled')`,
};

/** What the shared reads gave one stream since it last looked: the newest batch and the tasks that finished before it. */
interface Delivery {
  batch: BatchView;
  tasks: BatchTask[];
}

/** One stream's place in its batch's shared reader. */
interface Member {
  pending: Delivery | null;
  /** Its pending tasks outgrew the bound, or a shared read failed: it reads for itself next. */
  reread: boolean;
  wake: (() => void) | null;
}

/**
 * The one reader of a batch's changes in this process, shared by every stream of the batch:
 * on each announcement it reads the batch and the tasks finished since its previous read once,
 * and hands both to each of its streams, which drop the tasks their own cursor has already
 * sent. It starts from the tasks finished when it was made, and a stream joins it before its
 * own first read: a task either finished before that read (the stream read it itself) or
 * after it (a shared read after the stream joined finds it), so none is lost, and the
 * stream's cursor drops the ones it would see twice.
 */
class SharedReader {
  readonly members = new Set<Member>();
  private cursor = EventCursor.start;
  private readonly ended = new AbortController();
  private watch: BatchWatch | null = null;
  private readonly stopping: AbortSignal;
  private readonly stop = (): void => this.ended.abort();
  readonly ready: Promise<void>;

  constructor(
    private readonly events: BatchEvents,
    readonly accountId: string,
    readonly batchId: string,
    stopping: AbortSignal,
    private readonly onEnd: () => void,
  ) {
    this.stopping = stopping;
    stopping.addEventListener('abort', this.stop, { once: true });
    this.ready = this.start();
  }

  private async start(): Promise<void> {
    try {
      this.watch = await this.events.watcher.watch(this.batchId);
      const seqs = await this.events.read(SELECT_FINISHED_SEQS, [this.batchId]);
      for (const { seq } of seqs as { seq: number }[]) this.cursor = this.cursor.withTask(seq);
    } catch {
      // Its streams read for themselves until the last one leaves.
      for (const m of this.members) m.reread = true;
    }
    void this.run();
  }

  /** A stream leaves; the last one out ends the reader and its subscription. */
  leave(member: Member): void {
    this.members.delete(member);
    if (this.members.size === 0) this.end();
  }

  private end(): void {
    if (this.ended.signal.aborted && this.watch === null) return;
    this.ended.abort();
    this.stopping.removeEventListener('abort', this.stop);
    this.watch?.close();
    this.watch = null;
    this.onEnd();
  }

  private async run(): Promise<void> {
    const signal = this.ended.signal;
    while (!signal.aborted && this.members.size > 0) {
      await nextChange(this.watch, signal);
      if (signal.aborted || this.members.size === 0) break;
      let delivery: Delivery;
      this.events.sharedRounds++;
      try {
        const batch = await this.events.readBatch(this.accountId, this.batchId);
        // Tasks after the batch: once it says done, these reads find every task.
        const tasks: BatchTask[] = [];
        for (;;) {
          const page = await this.events.finishedTasks(this.batchId, this.cursor, batch);
          for (const task of page) this.cursor = this.cursor.withTask(task.seq);
          tasks.push(...page);
          if (page.length < EVENT_PAGE_SIZE) break;
        }
        delivery = { batch, tasks };
      } catch {
        for (const m of this.members) {
          m.reread = true;
          m.wake?.();
        }
        continue;
      }
      for (const m of this.members) {
        const tasks = [...(m.pending?.tasks ?? []), ...delivery.tasks];
        if (tasks.length > MAX_PENDING_TASKS) {
          m.pending = null;
          m.reread = true;
        } else m.pending = { batch: delivery.batch, tasks };
        m.wake?.();
      }
    }
    this.end();
  }
}

/** Waits for the batch's next announcement; without Redis, sleeps the slow fallback's interval. */
async function nextChange(watch: BatchWatch | null, signal: AbortSignal): Promise<void> {
  if (watch?.live) {
    const closing = (): void => watch.close();
    signal.addEventListener('abort', closing, { once: true });
    await watch.next(ANNOUNCED_RECHECK_MS);
    signal.removeEventListener('abort', closing);
    return;
  }
  await sleep(FALLBACK_POLL_MS, signal);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The progress stream of a batch (GET /v1/batches/{id}/events): a `task` event when each task
 * reaches its final status, a `batch` event (counts, done) when the batch changed, ending
 * after the batch event that says done. It waits on the same announcements as held long
 * polls (BatchWatcher: one Redis subscriber for the process). A stream's first read is its
 * own (from its Last-Event-ID); after that, the streams of one batch in this process share one
 * reader (SharedReader): one read per change, fanned out, whatever the number of streams.
 * Streams count against the same per-holder cap as held polls.
 */
@Injectable()
export class BatchEvents implements OnModuleDestroy {
  /** Ended when the process stops, so its HTTP server is not held open by streams that never end on their own terms. */
  private readonly stopping = new AbortController();
  private readonly readers = new Map<string, SharedReader>();
  /** Statements run against PostgreSQL by streams and their shared readers (for tests and metrics). */
  reads = 0;
  /** Announcements read once for all the streams of a batch (each costs its reads once, whatever the streams). */
  sharedRounds = 0;

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    readonly watcher: BatchWatcher,
    private readonly polling: BatchPolling,
  ) {
    // Every open stream and shared reader listens for the process stopping.
    setMaxListeners(0, this.stopping.signal);
  }

  /** Shared readers alive in this process: one per batch being streamed. */
  get sharedReaders(): number {
    return this.readers.size;
  }

  /**
   * The stream, as groups of events: the first group comes from the first read (so a missing
   * batch or a refused cap throws before anything is sent) and may be empty; a resumed stream
   * whose batch was done when it left yields nothing at all. The holder's slot is given back
   * when the generator ends or is returned.
   */
  async *open(req: EventStreamRequest): AsyncGenerator<BatchEvent[], void, void> {
    if (!isUuid(req.batchId)) throw notFound('Batch');
    let cursor = req.lastEventId ? EventCursor.parse(req.lastEventId, MAX_IMAGES_PER_BATCH - 1) : EventCursor.start;
    if (!this.polling.take(req.holder)) {
      throw new KilnError(ErrorCode.RateLimited, 'Too many held polls and streams for this key; close one first', {
        retryAfter: 5,
        limit: MAX_HELD_PER_HOLDER,
      });
    }
    const signal = AbortSignal.any([req.signal, this.stopping.signal]);
    const member: Member = { pending: null, reread: false, wake: null };
    let reader: SharedReader | null = null;
    const wake = (): void => member.wake?.();
    signal.addEventListener('abort', wake, { once: true });
    try {
      // Joined before the first read, so a change committed after it reaches this stream.
      reader = this.join(req.accountId, req.batchId, member);
      await reader.ready;
      /** Reads for this stream alone: the events its cursor has not sent, a page at a time. */
      const readOwn = async function* (this: BatchEvents, batch: BatchView, first: boolean): AsyncGenerator<BatchEvent[], void, void> {
        const changed = batch.version !== cursor.version || (batch.done && !cursor.done);
        if (!changed && !first) return;
        for (;;) {
          const page = await this.finishedTasks(req.batchId, cursor, batch);
          const events: BatchEvent[] = page.map((task) => {
            cursor = cursor.withTask(task.seq);
            return { id: cursor.id, type: 'task', task };
          });
          if (page.length < EVENT_PAGE_SIZE) {
            if (changed) {
              cursor = cursor.withVersion(batch.version, batch.done);
              events.push({ id: cursor.id, type: 'batch', batch });
            }
            yield events;
            return;
          }
          yield events;
          if (signal.aborted) return;
        }
      }.bind(this);

      let batch = await this.readBatch(req.accountId, req.batchId);
      // A stream resumed after its done event has nothing left to say: it ends at once.
      if (cursor.done) return;
      yield* readOwn(batch, true);
      while (!batch.done) {
        await waitFor(member, signal);
        if (signal.aborted) return;
        if (member.reread) {
          member.reread = false;
          member.pending = null;
          batch = await this.readBatch(req.accountId, req.batchId);
          yield* readOwn(batch, false);
          continue;
        }
        const delivery = member.pending!;
        member.pending = null;
        batch = delivery.batch;
        const events: BatchEvent[] = [];
        for (const task of delivery.tasks) {
          if (cursor.has(task.seq)) continue;
          cursor = cursor.withTask(task.seq);
          events.push({ id: cursor.id, type: 'task', task });
        }
        if (batch.version !== cursor.version || (batch.done && !cursor.done)) {
          cursor = cursor.withVersion(batch.version, batch.done);
          events.push({ id: cursor.id, type: 'batch', batch });
        }
        if (events.length > 0) yield events;
      }
    } finally {
      signal.removeEventListener('abort', wake);
      reader?.leave(member);
      this.polling.give(req.holder);
    }
  }

  /** Ends every open stream: its client reconnects, with its last event id, to another api. */
  onModuleDestroy(): void {
    this.stopping.abort();
  }

  /** The batch's shared reader, made by its first stream. */
  private join(accountId: string, batchId: string, member: Member): SharedReader {
    const key = `${accountId}:${batchId}`;
    let reader = this.readers.get(key);
    if (!reader) {
      const made: SharedReader = new SharedReader(this, accountId, batchId, this.stopping.signal, () => {
        if (this.readers.get(key) === made) this.readers.delete(key);
      });
      reader = made;
      this.readers.set(key, reader);
    }
    reader.members.add(member);
    return reader;
  }

  /** A statement, counted. */
  async read<T extends object>(statement: PreparedStatement, values: unknown[]): Promise<T[]> {
    this.reads++;
    return queryPrepared<T>(this.db, statement, values);
  }

  /** The batch with its live counts, on the caller's account. */
  async readBatch(accountId: string, batchId: string): Promise<BatchView> {
    this.reads += 2;
    const fields = await selectBatchFields(this.db, accountId, batchId);
    if (!fields) throw notFound('Batch');
    const counts = (await countTasksByBatch(this.db, [batchId])).get(batchId) ?? emptyCounts();
    return toBatchView(fields, counts);
  }

  /** A page of the finished tasks the cursor has not seen, in order. */
  async finishedTasks(batchId: string, cursor: EventCursor, batch: BatchView): Promise<BatchTask[]> {
    const { lows, highs } = cursor.bounds;
    const page = await this.read<TaskView>(SELECT_FINISHED_TASKS, [batchId, cursor.lowestUnseen, lows, highs, EVENT_PAGE_SIZE]);
    return page.map((task) => ({ ...task, ...taskPosition(task.seq, batch) }));
  }
}

/** Until the shared reader has something for this stream, or it is to read for itself, or it is closed. */
function waitFor(member: Member, signal: AbortSignal): Promise<void> {
  if (member.pending || member.reread || signal.aborted) return Promise.resolve();
  return new Promise<void>((resolve) => {
    member.wake = () => {
      member.wake = null;
      resolve();
    };
  });
}
