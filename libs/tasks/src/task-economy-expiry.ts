import { BillingService } from '@app/billing';
import { queryRows } from '@app/database';
import { ENDED_TASK_COLUMNS, EndedRow, endedTaskOf, FencedWrites } from './fenced-write';

/** What a task failed by its economy window's end says (error_code upstream_unavailable). */
export const ECONOMY_EXPIRED_MESSAGE = 'The economy window ended before the upstream made this image';

/**
 * The economy window's end (`pending`/`queued`/`running` -> `failed`, refunded): every
 * unfinished task of an economy batch past its expires_at fails with upstream_unavailable,
 * in one transaction per batch with its refunds and tally, the batch locked first. A task in
 * an upstream batch that still delivers later is no longer `running`, so its result is
 * never recorded (nor paid back twice: refundTasks skips a task already refunded, and the
 * ledger's once-per-task refund index stands behind both).
 */
export class TaskEconomyExpiry {
  constructor(
    private readonly writes: FencedWrites,
    private readonly billing: BillingService,
  ) {}

  /** Economy batches past their window with unfinished tasks, oldest first. */
  async expiredBatches(limit: number): Promise<string[]> {
    const rows = await queryRows<{ id: string }>(
      this.writes.db,
      `SELECT id FROM batches WHERE tier = 'economy' AND finished_at IS NULL AND expires_at IS NOT NULL AND expires_at <= now()
        ORDER BY expires_at LIMIT $1`,
      [limit],
    );
    return rows.map((r) => r.id);
  }

  /** Fails and refunds the batch's unfinished tasks; answers how many, and the batch's model. */
  expireBatch(batchId: string): Promise<{ count: number; model: string } | null> {
    return this.writes.inTransaction(batchId, async (m) => {
      const [batch] = await queryRows<{ unit_cost: number; model: string }>(
        m,
        `SELECT unit_cost, model FROM batches WHERE id = $1 AND expires_at <= now() FOR UPDATE`,
        [batchId],
      );
      if (!batch) return null;
      const rows = await queryRows<EndedRow>(
        m,
        `UPDATE tasks t SET status = 'failed', error = $2, error_code = 'upstream_unavailable', finished_at = now(), updated_at = now()
          WHERE batch_id = $1 AND tier = 'economy' AND status IN ('pending', 'queued', 'running')
          RETURNING t.id, t.batch_id, ${ENDED_TASK_COLUMNS}`,
        [batchId, ECONOMY_EXPIRED_MESSAGE],
      );
      if (rows.length === 0) return null;
      // Two statements for all of them (a batch may have 100,000 tasks), not three per task.
      const paid = await this.billing.refundTasks(
        m,
        rows.map((row) => ({ accountId: row.ended_account_id, batchId, taskId: row.id, amount: batch.unit_cost })),
      );
      const refunded = paid.size * batch.unit_cost;
      const tally = await this.writes.tally(m, batchId, { succeeded: 0, failed: rows.length, refunded, previewUrl: null });
      await this.writes.recordOutcomes(m, [batchId], { ended: rows.map(endedTaskOf), finishedBatchIds: tally.finished ? [batchId] : [] });
      return { count: rows.length, model: batch.model };
    });
  }
}
