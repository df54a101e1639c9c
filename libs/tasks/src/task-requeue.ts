import { BillingService } from '@app/billing';
import { BatchStatus, queryRows } from '@app/database';
import { batchStatusFromCounts } from './batch-status';
import { Fence, FencedWrites } from './fenced-write';
import { cancelUnsentTasks } from './task-cancellation';

/** What a give-back for a retry did. */
export type RequeueOutcome =
  /** `running -> queued`: the caller adds the job for the next attempt. */
  | 'requeued'
  /** The batch was cancelled meanwhile: the task is cancelled and refunded instead. */
  | 'cancelled'
  /** The fence no longer holds: nothing changed. */
  | null;

/** A task given back for another attempt, and the recovery of a batch whose tally was lost. */
export class TaskRequeues {
  constructor(
    private readonly writes: FencedWrites,
    private readonly billing: BillingService,
  ) {}

  /**
   * `running -> queued` for a retry (or a give-back at shutdown). If the batch was cancelled
   * meanwhile, the task is not queued again but cancelled and refunded in the same
   * transaction: between its attempts it is not in its provider's hands. The batch is locked
   * first, so a cancel either sees the task queued (and takes it) or comes after this.
   */
  requeue(fence: Fence): Promise<RequeueOutcome> {
    return this.writes.inTransaction(fence.batchId, async (m): Promise<RequeueOutcome> => {
      const [batch] = await queryRows<{ cancelled_at: Date | null }>(m, `SELECT cancelled_at FROM batches WHERE id = $1 FOR UPDATE`, [
        fence.batchId,
      ]);
      if (batch?.cancelled_at) {
        const cancelled = await cancelUnsentTasks(
          m,
          this.billing,
          fence.batchId,
          { taskId: fence.taskId, attempt: fence.attempt },
          this.writes,
        );
        return cancelled.count > 0 ? 'cancelled' : null;
      }
      const rows = await queryRows(
        m,
        `UPDATE tasks SET status = 'queued', progress = 0, sent_at = NULL, updated_at = now()
          WHERE id = $1 AND status = 'running' AND attempts = $2
          RETURNING id`,
        [fence.taskId, fence.attempt],
      );
      if (rows.length === 0) return null;
      await m.query(`UPDATE batches SET version = version + 1 WHERE id = $1`, [fence.batchId]);
      return 'requeued';
    });
  }

  /**
   * Recounts a batch whose tasks are all terminal but which was never marked finished (a
   * tally lost to a bug or a manual repair): counts from the tasks, refunds from billing.
   * Returns the status it settled on, or null when the batch is not finishable (yet).
   */
  finishFromTasks(batchId: string): Promise<BatchStatus | null> {
    return this.writes.inTransaction(batchId, async (m) => {
      const [batch] = await queryRows<{ status: BatchStatus }>(
        m,
        `SELECT status FROM batches WHERE id = $1 AND finished_at IS NULL FOR UPDATE`,
        [batchId],
      );
      if (!batch) return null;
      const [c] = await queryRows<{ succeeded: number; failed: number; cancelled: number; unfinished: number }>(
        m,
        `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
                count(*) FILTER (WHERE status = 'failed')::int AS failed,
                count(*) FILTER (WHERE status = 'cancelled')::int AS cancelled,
                count(*) FILTER (WHERE status IN ('pending', 'queued', 'running'))::int AS unfinished
           FROM tasks WHERE batch_id = $1`,
        [batchId],
      );
      if (c.unfinished > 0 || c.succeeded + c.failed + c.cancelled === 0) return null;
      const counts = { pending: 0, running: 0, succeeded: c.succeeded, failed: c.failed, cancelled: c.cancelled };
      const status = batchStatusFromCounts(batch.status, counts);
      const refunded = await this.billing.refundedForBatch(m, batchId);
      await m.query(
        `UPDATE batches SET succeeded_count = $2, failed_count = $3, cancelled_count = $4, credits_refunded = $5, status = $6,
                finished_at = now(), version = version + 1
          WHERE id = $1`,
        [batchId, c.succeeded, c.failed, c.cancelled, refunded, status],
      );
      await this.writes.recordOutcomes(m, [batchId], { ended: [], finishedBatchIds: [batchId] });
      return status;
    });
  }
}
