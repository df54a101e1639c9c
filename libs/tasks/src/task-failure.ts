import { EntityManager } from 'typeorm';
import { BillingService, RefundTask } from '@app/billing';
import { pgError, queryRows, TaskErrorCode } from '@app/database';
import { ENDED_TASK_COLUMNS, EndedRow, endedTaskOf, Fence, FencedWrites, TallyResult } from './fenced-write';

/** Terminal failure (`running -> failed`) and the task's refund. */
export class TaskFailures {
  constructor(
    private readonly writes: FencedWrites,
    private readonly billing: BillingService,
  ) {}

  /**
   * Terminal failure: the task, its refund and its batch's tally in one transaction, so a
   * crash anywhere leaves either all of it or none. The batch is locked first (see the lock
   * order in FencedWrites). The fenced update admits one writer, so a cancelled task is never
   * also refunded as failed; the ledger's unique index on task refunds is the backstop, and a
   * refund it refuses means "already refunded", not an error. `upstreamCostMicros`: what the
   * upstream billed for the failed request (0 unless its type bills failures). Returns null when
   * the fence no longer holds.
   */
  fail(fence: Fence, message: string, code: TaskErrorCode, upstreamCostMicros = 0): Promise<(TallyResult & { refunded: number }) | null> {
    return this.writes.inTransaction(fence.batchId, async (m) => {
      const [batch] = await m.query(`SELECT unit_cost FROM batches WHERE id = $1 FOR UPDATE`, [fence.batchId]);
      // No batch row means no task row either (they go together).
      if (!batch) return null;
      const rows = await queryRows<EndedRow>(
        m,
        `UPDATE tasks t SET status = 'failed', error = $3, error_code = $4, finished_at = now(), updated_at = now(),
                upstream_cost_micros = t.upstream_cost_micros + $5
          WHERE id = $1 AND status = 'running' AND attempts = $2
          RETURNING t.id, t.batch_id, ${ENDED_TASK_COLUMNS}`,
        [fence.taskId, fence.attempt, message, code, upstreamCostMicros],
      );
      if (rows.length === 0) return null;
      const accountId = rows[0].ended_account_id;
      const refunded = await this.refundOnce(m, { accountId, batchId: fence.batchId, taskId: fence.taskId, amount: batch.unit_cost });
      const tally = await this.writes.tally(m, fence.batchId, { succeeded: 0, failed: 1, refunded, previewUrl: null });
      await this.writes.recordOutcomes(m, [fence.batchId], {
        ended: rows.map(endedTaskOf),
        finishedBatchIds: tally.finished ? [fence.batchId] : [],
      });
      return { ...tally, refunded };
    });
  }

  private async refundOnce(m: EntityManager, refund: RefundTask): Promise<number> {
    await m.query('SAVEPOINT task_refund');
    try {
      await this.billing.refundTask(m, refund);
      await m.query('RELEASE SAVEPOINT task_refund');
      return refund.amount;
    } catch (err) {
      if (!isRefundAlreadyMade(err)) throw err;
      await m.query('ROLLBACK TO SAVEPOINT task_refund');
      this.writes.logger.warn(`Task ${refund.taskId} was already refunded; not refunding it again`);
      return 0;
    }
  }
}

/** PostgreSQL unique_violation on the ledger's once-per-task refund index. */
function isRefundAlreadyMade(err: unknown): boolean {
  const { code, constraint } = pgError(err);
  return code === '23505' && (constraint === undefined || constraint === 'ledger_task_refund_once');
}
