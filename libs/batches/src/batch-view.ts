import { BatchEntity, BatchStatus, TaskEntity, TaskStatus } from '@app/database';

/** Interface 2.5. `pending` counts pending and queued tasks (decisions.md 2). */
export interface TaskCounts {
  pending: number;
  running: number;
  succeeded: number;
  failed: number;
}

/** The batch columns clients see (interface 2.4): all the polling endpoint reads of the row. */
export type BatchFields = Pick<
  BatchEntity,
  | 'id'
  | 'createdAt'
  | 'prompts'
  | 'model'
  | 'aspectRatio'
  | 'resolution'
  | 'quality'
  | 'background'
  | 'countPerCombo'
  | 'refMode'
  | 'refImages'
  | 'total'
  | 'note'
  | 'previewUrl'
  | 'createdViaApi'
  | 'status'
  | 'creditsCharged'
  | 'creditsRefunded'
>;

/** A batch as clients see it: the row plus its live task counts and whether it is done. */
export type BatchView = BatchFields & { counts: TaskCounts; done: boolean };

/** The task columns clients see (interface 2.6), plus seq, its place in the fan-out. */
export type TaskView = Pick<TaskEntity, 'id' | 'batchId' | 'seq' | 'prompt' | 'status' | 'progress' | 'resultUrl' | 'error'>;

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

export function toBatchView<B extends BatchFields>(batch: B, counts: TaskCounts): B & BatchView {
  const done = counts.pending + counts.running === 0;
  return Object.assign(batch, { counts, done, status: deriveStatus(batch.status, counts) });
}
