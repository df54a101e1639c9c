import { InjectQueue } from '@nestjs/bull';
import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { JobOptions, Queue } from 'bull';
import { DataSource } from 'typeorm';
import { queryRows } from '@app/database';
import { RenderJobData, TASK_QUEUE, TaskJob } from './queue.contract';

/** What dispatching needs to know of a task. */
export interface DispatchableTask {
  id: string;
  /** Position in its batch, 0-based; drives the job's priority. */
  seq: number;
}

/** Bull accepts priorities 1 (highest) .. 2^21; past this every task waits alike. */
export const MAX_TASK_PRIORITY = 1000;

/**
 * Fairness between batches: the n-th task of every batch gets priority n (1 = first served).
 * Bull serves lower numbers first and keeps FIFO order within a priority, so the queue
 * interleaves batches round-robin: a 1-image batch created behind another account's
 * 100-image batch waits for at most one task of it, not all 100. The cost is that a large
 * batch's tail yields to every newer batch's head, which is the trade we want.
 */
export function taskPriority(seq: number): number {
  return Math.min(seq + 1, MAX_TASK_PRIORITY);
}

export function renderJob(task: DispatchableTask): { name: string; data: RenderJobData; opts: JobOptions } {
  return {
    name: TaskJob.Render,
    data: { taskId: task.id },
    // jobId = task id makes enqueueing idempotent: Bull ignores a second add of a live job.
    // attempts: 1 because the generator retries upstream failures itself (decisions.md 11).
    opts: { jobId: task.id, attempts: 1, priority: taskPriority(task.seq) },
  };
}

/**
 * Hands committed tasks to the generator through Bull. The database is the source of
 * truth: a task that never reached Redis stays `pending` and `reconcilePending` enqueues it
 * later, so a Redis outage delays tasks but never loses them or fails the request.
 */
@Injectable()
export class TaskDispatchService {
  private readonly logger = new Logger(TaskDispatchService.name);
  /** How long a request waits for Redis before leaving its tasks to the reconciler. */
  enqueueTimeoutMs = 2000;

  constructor(
    @InjectQueue(TASK_QUEUE) private readonly queue: Queue,
    @InjectDataSource() private readonly db: DataSource,
  ) {}

  /** Enqueues the tasks and marks them `queued`; returns how many moved. Never throws: the request that created them has already succeeded. */
  async dispatch(tasks: readonly DispatchableTask[]): Promise<number> {
    if (tasks.length === 0) return 0;
    try {
      await withTimeout(this.queue.addBulk(tasks.map(renderJob)), this.enqueueTimeoutMs);
    } catch (err) {
      this.logger.warn(
        `Could not enqueue ${tasks.length} task(s) (${errorMessage(err)}); ` +
          'they stay pending until the reconciler enqueues them',
      );
      return 0;
    }
    try {
      // Only pending -> queued: a worker may already have taken a task to `running`.
      const moved = await queryRows<{ id: string }>(
        this.db,
        `UPDATE tasks SET status = 'queued', updated_at = now()
          WHERE id = ANY($1::uuid[]) AND status = 'pending' RETURNING id`,
        [tasks.map((t) => t.id)],
      );
      return moved.length;
    } catch (err) {
      // The jobs are in Redis; the rows catch up when the reconciler re-adds them (a no-op in Bull).
      this.logger.warn(`Enqueued ${tasks.length} task(s) but could not mark them queued: ${errorMessage(err)}`);
      return 0;
    }
  }

  /**
   * Enqueues `pending` tasks last touched more than `olderThanMs` ago (so requests still
   * dispatching their own tasks are left alone). Safe to run on every replica at once:
   * the job id dedupes in Bull and the status update is conditional. Returns how many
   * tasks moved to `queued`.
   */
  async reconcilePending(olderThanMs = 5000, limit = 1000): Promise<number> {
    const rows = await this.db.query(
      `SELECT id, seq FROM tasks
        WHERE status = 'pending' AND updated_at <= now() - ($1::double precision * interval '1 millisecond')
        ORDER BY updated_at, seq
        LIMIT $2`,
      [Math.max(0, Math.floor(olderThanMs)), limit],
    );
    const tasks = (rows as { id: string; seq: number }[]).map((r) => ({ id: r.id, seq: r.seq }));
    const moved = await this.dispatch(tasks);
    if (moved > 0) this.logger.log(`Reconciler enqueued ${moved} pending task(s)`);
    return moved;
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
