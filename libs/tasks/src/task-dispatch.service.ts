import { InjectQueue } from '@nestjs/bull';
import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { JobCounts, Queue } from 'bull';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { queryRows } from '@app/database';
import { ErrorCode, KilnError } from '@app/errors';
import { withinRedisDeadline } from '@app/redis';
import { BatchChangePublisher, bumpBatchVersions } from './batch-changes';
import { statusIs } from './fenced-write';
import { renderJob, RenderJobTask, TASK_QUEUE } from './task-queue.contract';

/**
 * Moves up to $1 pending tasks to `queued`, fairest first: every batch's n-th task before
 * any batch's (n+1)-th, older batches first among equals. The queue thus interleaves batches
 * round-robin: a 1-image batch created behind another account's 10,000-image batch waits
 * for the short queue, not for the big batch; the price is that a big batch's tail yields to
 * every newer batch's head. SKIP LOCKED lets several feeders run at once; the partial index
 * tasks_pending_fair_idx serves the order.
 */
const TAKE_PENDING_SQL = `
WITH next AS (
  SELECT id FROM tasks WHERE status = 'pending' AND tier = 'standard'
   ORDER BY seq, created_at, id
   LIMIT $1
   FOR UPDATE SKIP LOCKED
)
UPDATE tasks t SET status = 'queued', updated_at = now()
  FROM next WHERE t.id = next.id
RETURNING t.id, t.batch_id, t.seq, t.created_at`;

/** How long a new batch waits to learn the queue's length before settling for its window. */
const ROOM_CHECK_TIMEOUT_MS = 250;
/** An operator's queue view answers service_unavailable rather than wait longer for Redis. */
const QUEUE_STATS_TIMEOUT_MS = 1500;

/**
 * Hands tasks to the generator through Bull. The database is the source of truth and holds
 * the backlog: a batch's first `dispatchWindow` tasks (all of them while the queue has room)
 * are written `queued` and enqueued by the request that created it (so work starts at once),
 * the rest stay `pending` until a generator's feeder tops the queue up to `queueDepth` jobs
 * in fair order. Redis thus only ever holds a short queue. A task that could not reach Redis
 * goes back to `pending`, where the feeder picks it up again: a Redis outage delays tasks but
 * never loses them or fails the request.
 */
@Injectable()
export class TaskDispatchService {
  private readonly logger = new Logger(TaskDispatchService.name);
  /** How long a caller waits for Redis before leaving its tasks to the feeder. */
  enqueueTimeoutMs = 2000;
  /** The room check in flight, shared by the creations that come while it is (waitingCount). */
  private waitingAsked: Promise<number> | null = null;

  constructor(
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    @InjectDataSource() private readonly db: DataSource,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly changes: BatchChangePublisher,
  ) {}

  /**
   * How many of a new batch's tasks (the first by seq) to write `queued` and enqueue with
   * the request: its `dispatchWindow`, or more while the queue holds fewer than `depth` jobs.
   * A queue with room means no other batch has tasks pending (the feeders would have filled
   * it), so the new batch's tasks are what a feeder would enqueue next anyway; enqueueing them
   * at once spares an idle system a top-up round (a PostgreSQL update and a Redis add per
   * task, about 100 ms for a 100-image batch) before all of it starts. Fairness is unchanged:
   * a newcomer still waits behind at most about `depth` jobs. If Redis does not answer
   * quickly, the window applies.
   */
  async dispatchCount(total: number): Promise<number> {
    const { dispatchWindow, depth } = this.config.queue;
    if (total <= dispatchWindow) return total;
    try {
      const waiting = await this.waitingCount();
      return Math.max(dispatchWindow, Math.min(total, depth - waiting));
    } catch {
      return dispatchWindow;
    }
  }

  /**
   * The queue's waiting jobs, asked once for every creation that wants it meanwhile: they
   * would all get the same answer, and creations arrive together under load (a MULTI to Redis
   * per request was 5 % of the api's CPU at 150 creations/s).
   */
  private waitingCount(): Promise<number> {
    this.waitingAsked ??= withinRedisDeadline(this.queue.getWaitingCount(), ROOM_CHECK_TIMEOUT_MS).finally(() => {
      this.waitingAsked = null;
    });
    return this.waitingAsked;
  }

  /**
   * Adds the jobs of tasks already written `queued` (a new batch's window). Never throws: the
   * request that created them has already succeeded. Returns how many reached the queue.
   */
  async enqueueQueued(tasks: readonly RenderJobTask[]): Promise<number> {
    if (tasks.length === 0) return 0;
    try {
      await withinRedisDeadline(this.queue.addBulk(tasks.map(renderJob)), this.enqueueTimeoutMs);
      return tasks.length;
    } catch (err) {
      this.logger.warn(`Could not enqueue ${tasks.length} task(s) (${errorMessage(err)}); they go back to pending for the feeder`);
      await this.backToPending(tasks.map((t) => t.id));
      return 0;
    }
  }

  /**
   * The task queue as an operator sees it: Bull's counts, and `pending`, the backlog of tasks
   * still in PostgreSQL waiting for a feeder (Redis only ever holds a short queue, so its
   * `waiting` alone would hide a backlog of any size). Counted on tasks_pending_fair_idx.
   */
  async queueStats(): Promise<{ name: string; pending: number } & Record<string, number | string>> {
    const [counts, [{ pending }]] = await Promise.all([
      this.jobCounts(),
      queryRows<{ pending: number }>(this.db, `SELECT count(*)::int AS pending FROM tasks WHERE status = 'pending' AND tier = 'standard'`),
    ]);
    return { name: TASK_QUEUE, ...counts, pending };
  }

  /**
   * The backlog in PostgreSQL: how many tasks wait for room in the queue, and for how long
   * the oldest has (seconds since it became pending). Economy tasks wait for their collector, not
   * for room in the queue: they are not backlog.
   */
  async backlog(): Promise<{ pending: number; oldestPendingSeconds: number }> {
    const [row] = await queryRows<{ pending: number; oldest: number }>(
      this.db,
      `SELECT count(*)::int AS pending, COALESCE(EXTRACT(EPOCH FROM now() - min(updated_at)), 0)::float8 AS oldest
         FROM tasks WHERE status = 'pending' AND tier = 'standard'`,
    );
    return { pending: row.pending, oldestPendingSeconds: row.oldest };
  }

  /** Bull's job counts (waiting, active, delayed, ...), or a 503 KilnError within QUEUE_STATS_TIMEOUT_MS. */
  async jobCounts(): Promise<JobCounts> {
    return withinRedisDeadline(this.queue.getJobCounts(), QUEUE_STATS_TIMEOUT_MS).catch((err) => {
      throw new KilnError(ErrorCode.ServiceUnavailable, `The task queue's Redis is unavailable (${errorMessage(err)}); retry shortly`, {
        dependency: 'redis',
      });
    });
  }

  /**
   * Takes up to `max` pending tasks in fair order and enqueues them. Safe on every generator
   * replica at once. Returns how many reached the queue.
   */
  async feed(max: number): Promise<number> {
    if (max <= 0) return 0;
    const rows = await queryRows<{ id: string; batch_id: string; seq: number; created_at: Date }>(this.db, TAKE_PENDING_SQL, [
      Math.floor(max),
    ]);
    if (rows.length === 0) return 0;
    await this.tasksShownChanged(rows.map((r) => r.batch_id));
    // UPDATE ... RETURNING has no order of its own; the queue must get the fair one.
    rows.sort((a, b) => a.seq - b.seq || a.created_at.getTime() - b.created_at.getTime() || (a.id < b.id ? -1 : 1));
    return this.enqueueQueued(rows.map((r) => ({ id: r.id, batchId: r.batch_id, seq: r.seq })));
  }

  /**
   * pending <-> queued shows in the tasks' status, so their batches' versions move; bumped
   * after the tasks' own statement (bumpBatchVersions says why that is safe), which locks
   * tasks with SKIP LOCKED and must not wait for a batch lock while holding them.
   */
  private async tasksShownChanged(batchIds: string[]): Promise<void> {
    try {
      await bumpBatchVersions(this.db, batchIds);
      this.changes.announce(batchIds);
    } catch (err) {
      this.logger.warn(`Could not bump the versions of ${new Set(batchIds).size} batch(es): ${errorMessage(err)}`);
    }
  }

  /**
   * `queued -> pending` for tasks whose jobs may not exist. A job that did reach Redis after
   * all still runs (a worker claims pending tasks too) and the feeder's second add of the
   * same job id is a no-op. If even this write fails, the reconciler finds the tasks queued
   * without a job and adds them.
   */
  private async backToPending(taskIds: readonly string[]): Promise<void> {
    try {
      const rows = await queryRows<{ batch_id: string }>(
        this.db,
        `UPDATE tasks t SET status = 'pending', updated_at = now() WHERE t.id = ANY($1::uuid[]) AND ${statusIs('t', 'queued')} RETURNING t.batch_id`,
        [taskIds],
      );
      await this.tasksShownChanged(rows.map((r) => r.batch_id));
    } catch (err) {
      this.logger.warn(`Could not put ${taskIds.length} task(s) back to pending: ${errorMessage(err)}`);
    }
  }
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
