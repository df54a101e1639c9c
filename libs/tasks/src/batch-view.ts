import { BatchEntity } from '@app/database';
import { batchIsDone, batchStatusFromCounts, storedCounts, TaskCounts } from './batch-status';

/** The batch columns clients see: all the polling endpoint reads of the row. */
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
  | 'seed'
  | 'outputFormat'
  | 'previewUrl'
  | 'createdViaApi'
  | 'status'
  | 'creditsCharged'
  | 'creditsRefunded'
  | 'cancelledAt'
  | 'version'
  | 'tier'
  | 'expiresAt'
  | 'deadline'
  | 'cancelReason'
>;

/** A batch as clients see it: the row plus its live task counts and whether it is done. */
export type BatchView = BatchFields & { counts: TaskCounts; done: boolean };

/**
 * Status follows from the counts (batchStatusFromCounts), so it always agrees with `done`
 * and `counts` even while the generator's own bookkeeping on the batch row lags a moment.
 */
export function toBatchView<B extends BatchFields>(batch: B, counts: TaskCounts): B & BatchView {
  const done = batchIsDone(counts);
  return Object.assign(batch, { counts, done, status: batchStatusFromCounts(batch.status, counts) });
}

/**
 * A batch as clients see it, from its row alone: its counts are the row's tallies
 * (storedCounts). For a batch the write that read it has just finished (the outbox's
 * batch.completed), where those tallies are final.
 */
export function storedBatchView(batch: BatchEntity): BatchEntity & BatchView {
  return toBatchView(batch, storedCounts(batch));
}
