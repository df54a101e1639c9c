import { Inject, Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { BillingService } from '@app/billing';
import { queryRows } from '@app/database';
import { BatchChangePublisher } from './batch-changes';
import { FencedWrites } from './fenced-write';
import { CancelledTasks, cancelUnsentTasks } from './task-cancellation';
import { TASK_OUTCOME_HOOK, TaskOutcomeHook } from './task-outcome.hook';

/** What one deadline sweep did. */
export interface DeadlineReport {
  /** Batches whose unsent tasks it cancelled. */
  batches: number;
  /** Tasks it cancelled and refunded. */
  tasks: number;
}

/**
 * Batch deadlines (docs/api.md#deadlines). Past a batch's deadline no task of it is sent any
 * more (the claim and the send refuse, overdueBatchesIn), and this sweep, run by the
 * generator's reconciler, cancels and refunds what is left unsent exactly as a cancel does
 * (cancelUnsentTasks: one `cancel_refund` row, each task moved once), with the batch's
 * cancel_reason 'deadline'. Tasks already sent run on and settle as usual. A task given back
 * for a retry after the deadline is unsent again, so a later pass takes it; a batch whose
 * work was all sent by then is left alone (it is not marked cancelled).
 *
 * The batch row is locked first, as by every task write, so a claim-and-send racing the
 * sweep either sends the task before it (the sweep then skips it: it runs) or finds it
 * cancelled (it never runs): never both.
 */
@Injectable()
export class BatchDeadlines {
  private readonly writes: FencedWrites;

  constructor(
    @InjectDataSource() db: DataSource,
    private readonly billing: BillingService,
    changes: BatchChangePublisher,
    @Optional() @Inject(TASK_OUTCOME_HOOK) outcomes: TaskOutcomeHook | null = null,
  ) {
    this.writes = new FencedWrites(db, changes, outcomes);
  }

  /** Cancels the unsent tasks of up to `limit` batches past their deadline, oldest deadline first. */
  async sweep(limit: number): Promise<DeadlineReport> {
    const report: DeadlineReport = { batches: 0, tasks: 0 };
    for (const batchId of await this.overdueBatches(limit)) {
      const cancelled = await this.cancelPastDeadline(batchId);
      if (cancelled && cancelled.count > 0) {
        report.batches++;
        report.tasks += cancelled.count;
      }
    }
    return report;
  }

  /** Open batches past their deadline with a task cancelUnsentTasks would take (its condition). */
  private async overdueBatches(limit: number): Promise<string[]> {
    const rows = await queryRows<{ id: string }>(
      this.writes.db,
      `SELECT b.id FROM batches b
        WHERE b.deadline IS NOT NULL AND b.finished_at IS NULL AND b.deadline <= now()
          AND EXISTS (SELECT 1 FROM tasks t WHERE t.batch_id = b.id
                        AND (t.status IN ('pending', 'queued') OR (t.status = 'running' AND t.sent_at IS NULL))
                        AND t.upstream_request_id IS NULL AND t.upstream_batch_id IS NULL)
        ORDER BY b.deadline LIMIT $1`,
      [limit],
    );
    return rows.map((r) => r.id);
  }

  /**
   * One batch, in one transaction under its lock: null when it is not past its deadline or
   * has finished. A batch its caller cancelled first keeps that cancel's (null) reason.
   */
  cancelPastDeadline(batchId: string): Promise<CancelledTasks | null> {
    return this.writes.inTransaction(batchId, async (m) => {
      const [batch] = await queryRows<{ cancelled_at: Date | null }>(
        m,
        `SELECT cancelled_at FROM batches WHERE id = $1 AND deadline <= now() AND finished_at IS NULL FOR UPDATE`,
        [batchId],
      );
      if (!batch) return null;
      // Set before the cancel, so a batch.completed it records carries the reason.
      if (!batch.cancelled_at) await m.query(`UPDATE batches SET cancel_reason = 'deadline' WHERE id = $1`, [batchId]);
      return cancelUnsentTasks(m, this.billing, batchId, undefined, this.writes);
    });
  }
}
