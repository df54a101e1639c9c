import { BatchStatus, TaskStatus } from '@app/database';

/**
 * A batch's status, and whether it is done, follow from its tasks' counts. This file is the
 * rules' one home: the TypeScript forms answer reads (a batch as clients see it), the SQL
 * forms are what the generator's writes store on the batch row (status, finished_at) in the
 * same statement as the task updates. A test evaluates both over a grid of counts and
 * asserts they agree (test/batch-status.e2e-spec.ts). What the row stores of "done" is read
 * through BATCH_DONE_SQL / BATCH_OPEN_SQL (libs/database, beside the column and its index).
 */

/**
 * `pending` counts every task not yet handed to its provider (pending, queued, and claimed by
 * a worker that still waits for a slot); `running`, the tasks in their provider's hands.
 */
export interface TaskCounts {
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
  cancelled: number;
  /**
   * Of the `running` tasks, those whose cancel was asked of their upstream and not yet
   * answered (not counted apart: the counts still sum to the total). Read from the tasks
   * (the api's reads); absent where counts come from the batch row's tallies.
   */
  cancelling?: number;
}

/** Counts as the api's reads build them from the tasks, `cancelling` included. */
export function emptyCounts(): TaskCounts {
  return { pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0, cancelling: 0 };
}

export function addToCounts(counts: TaskCounts, status: TaskStatus, n = 1): TaskCounts {
  switch (status) {
    case 'pending':
    case 'queued':
      counts.pending += n;
      break;
    case 'running':
      counts.running += n;
      break;
    case 'succeeded':
      counts.succeeded += n;
      break;
    case 'failed':
      counts.failed += n;
      break;
    case 'cancelled':
      counts.cancelled += n;
      break;
  }
  return counts;
}

/** A batch is done once none of its tasks waits or runs: it has then finished (finished_at is set). */
export function batchIsDone(counts: TaskCounts): boolean {
  return counts.pending + counts.running === 0;
}

/**
 * The counts a batch row stores (its tallies): every task not settled yet counts as waiting,
 * since the row cannot tell waiting tasks from running ones. Exact for a done batch, which is
 * what the row is read for (batch.completed).
 */
export function storedCounts(row: { total: number; succeededCount: number; failedCount: number; cancelledCount: number }): TaskCounts {
  const settled = row.succeededCount + row.failedCount + row.cancelledCount;
  return {
    pending: Math.max(0, row.total - settled),
    running: 0,
    succeeded: row.succeededCount,
    failed: row.failedCount,
    cancelled: row.cancelledCount,
    // Stored counts serve finished batches (batch.completed): none waits on an upstream cancel.
    cancelling: 0,
  };
}

/**
 * A batch without tasks keeps what is stored; once no task is waiting or running it is
 * cancelled if any task was, else it succeeded, failed or partly did; until then it is
 * pending while every task waits, and running after that (a cancelled batch too, while its
 * provider finishes the tasks it holds).
 */
export function batchStatusFromCounts(stored: BatchStatus, counts: TaskCounts): BatchStatus {
  const total = counts.pending + counts.running + counts.succeeded + counts.failed + counts.cancelled;
  if (total === 0) return stored;
  if (counts.pending + counts.running === 0) {
    if (counts.cancelled > 0) return 'cancelled';
    if (counts.failed === 0) return 'succeeded';
    return counts.succeeded === 0 ? 'failed' : 'partial';
  }
  return counts.pending === total ? 'pending' : 'running';
}

/** SQL expressions for the stored status and each count (column names, parameters, sums). */
export interface TaskCountsSql {
  stored: string;
  pending: string;
  running: string;
  succeeded: string;
  failed: string;
  cancelled: string;
}

/** batchIsDone as one SQL expression. */
export function batchIsDoneSql(c: Omit<TaskCountsSql, 'stored'>): string {
  return `((${c.pending}) + (${c.running}) = 0)`;
}

/** batchStatusFromCounts as one SQL expression, line for line. */
export function batchStatusFromCountsSql(c: TaskCountsSql): string {
  const total = `(${c.pending}) + (${c.running}) + (${c.succeeded}) + (${c.failed}) + (${c.cancelled})`;
  return `(CASE
    WHEN ${total} = 0 THEN (${c.stored})
    WHEN (${c.pending}) + (${c.running}) = 0 THEN
      CASE WHEN (${c.cancelled}) > 0 THEN 'cancelled' WHEN (${c.failed}) = 0 THEN 'succeeded' WHEN (${c.succeeded}) = 0 THEN 'failed' ELSE 'partial' END
    WHEN (${c.pending}) = ${total} THEN 'pending'
    ELSE 'running' END)`;
}
