import { BatchStatus, TaskStatus } from '@app/database';

/**
 * A batch's status follows from its tasks' counts. This file is the rule's one home: the
 * TypeScript form answers reads (a batch as clients see it), the SQL form is what the
 * generator's writes store on the batch row in the same statement as the task updates. A
 * test evaluates both over a grid of counts and asserts they agree.
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
}

export function emptyCounts(): TaskCounts {
  return { pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 0 };
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
