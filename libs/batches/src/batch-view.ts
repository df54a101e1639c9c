import { BatchEntity, BatchStatus, TaskStatus } from '@app/database';

/** Interface 2.5. `pending` counts pending and queued tasks (decisions.md 2). */
export interface TaskCounts {
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
}

/** A batch as clients see it: the row plus its live task counts and whether it is done. */
export type BatchView = BatchEntity & { counts: TaskCounts; done: boolean };

export function emptyCounts(): TaskCounts {
  return { pending: 0, running: 0, succeeded: 0, failed: 0 };
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
  }
  return counts;
}

/**
 * Status follows from the counts (decisions.md 2), so it always agrees with `done` and
 * `counts` even while the generator's own bookkeeping on the batch row lags a moment.
 */
export function deriveStatus(stored: BatchStatus, counts: TaskCounts): BatchStatus {
  if (stored === 'cancelled') return stored;
  const total = counts.pending + counts.running + counts.succeeded + counts.failed;
  if (total === 0) return stored;
  if (counts.pending + counts.running === 0) {
    if (counts.failed === 0) return 'succeeded';
    return counts.succeeded === 0 ? 'failed' : 'partial';
  }
  return counts.pending === total ? 'pending' : 'running';
}

export function toBatchView(batch: BatchEntity, counts: TaskCounts): BatchView {
  const done = counts.pending + counts.running === 0;
  return Object.assign(batch, { counts, done, status: deriveStatus(batch.status, counts) });
}
