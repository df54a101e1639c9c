import { Inject, Injectable, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BillingService } from '@app/billing';
import { BatchStatus, queryRows } from '@app/database';
import { ErrorCode, KilnError, notFound } from '@app/errors';
import { UPSTREAM_CANCEL_TYPES } from '@app/providers';
import { BatchChangePublisher } from './batch-changes';
import { tallyAssignments } from './batch-tally';
import { FencedWrites } from './fenced-write';
import { UpstreamCancelSignal } from './upstream-cancel.store';
import { TASK_OUTCOME_HOOK, TaskOutcomeHook } from './task-outcome.hook';

/** What one cancelling transaction did. */
export interface CancelledTasks {
  /** Tasks it moved to `cancelled`. */
  count: number;
  /** Tasks a queue upstream had accepted whose cancel it asked of that upstream (markUpstreamCancels). */
  cancelling: number;
  /** Credits it refunded (one `cancel_refund` row), 0 when it took no task. */
  refunded: number;
  status: BatchStatus;
  /** The batch is done (its last unsettled task was among these, or none is left). */
  finished: boolean;
}

/**
 * Every task of the batch not in its provider's hands (`pending`, `queued`, and `running`
 * but not sent: its worker still waits for a slot; never one a queue upstream has accepted,
 * even between two attempts: that request runs on, or is asked of its upstream to cancel
 * (markUpstreamCancels); never an economy task the collector has
 * put in an upstream batch (upstream_batch_id set), whatever its status and sent_at say: it
 * runs on with its upstream batch) becomes `cancelled`; one refund row
 * carries their price, and the batch's tally counts them, sets cancelledAt and bumps its
 * version. With `only`, just that attempt of one task (a retry given back after the batch
 * was cancelled: between attempts, it is in no provider's hands either).
 *
 * The caller holds the batch row's lock (FOR UPDATE) in `m`, taken before any task lock, the
 * order every task write keeps. Each task moves to `cancelled` once (the update's condition),
 * and only the tasks so moved are counted and refunded: a task that succeeded, failed or was
 * sent meanwhile is neither cancelled nor refunded here.
 */
export async function cancelUnsentTasks(
  m: EntityManager,
  billing: BillingService,
  batchId: string,
  only?: { taskId: string; attempt: number },
  writes?: FencedWrites,
): Promise<CancelledTasks> {
  const taken = only
    ? await queryRows<{ id: string }>(
        m,
        `UPDATE tasks SET status = 'cancelled', progress = 0, finished_at = now(), updated_at = now()
          WHERE id = $2 AND batch_id = $1 AND status = 'running' AND attempts = $3 AND upstream_request_id IS NULL
            AND upstream_batch_id IS NULL
          RETURNING id`,
        [batchId, only.taskId, only.attempt],
      )
    : await queryRows<{ id: string }>(
        m,
        `UPDATE tasks SET status = 'cancelled', progress = 0, finished_at = now(), updated_at = now()
          WHERE batch_id = $1 AND (status IN ('pending', 'queued') OR (status = 'running' AND sent_at IS NULL))
            AND upstream_request_id IS NULL AND upstream_batch_id IS NULL
          RETURNING id`,
        [batchId],
      );
  const count = taken.length;
  const [batch] = await queryRows<{ account_id: string; unit_cost: number }>(m, `SELECT account_id, unit_cost FROM batches WHERE id = $1`, [
    batchId,
  ]);
  const refunded = count * batch.unit_cost;
  if (refunded > 0) await billing.refundCancelled(m, { accountId: batch.account_id, batchId, amount: refunded, tasks: count });
  const [row] = await queryRows<{ status: BatchStatus; finished_at: Date | null }>(
    m,
    `UPDATE batches SET cancelled_at = COALESCE(cancelled_at, now()),
            ${tallyAssignments({ succeeded: '0', failed: '0', cancelled: '$2', refunded: '$3', preview: 'NULL' })}
      WHERE id = $1
      RETURNING status, finished_at`,
    [batchId, count, refunded],
  );
  // A cancel that leaves nothing running finishes the batch here: its batch.completed goes in
  // the outbox with it, as when the last task settles (cancelled tasks have no event of their own).
  if (count > 0 && row.finished_at !== null && writes) {
    await writes.recordOutcomes(m, [batchId], { ended: [], finishedBatchIds: [batchId] });
  }
  return { count, refunded, status: row.status, finished: row.finished_at !== null, cancelling: 0 };
}

/**
 * Marks for their upstream's cancel the batch's tasks a queue upstream with a cancel (fal,
 * Replicate: UPSTREAM_CANCEL_TYPES) has accepted (a request id recorded, the task unfinished:
 * between two attempts too, when its next attempt resumes the request), each once: a generator sends it (UpstreamCancelStore) and cancels and refunds the task if the
 * upstream confirms it did not run. The api never calls an upstream. The caller holds the
 * batch row's lock, in the cancel's transaction. Answers how many it marked.
 */
export async function markUpstreamCancels(m: EntityManager, batchId: string): Promise<number> {
  const marked = await queryRows<{ id: string }>(
    m,
    `UPDATE tasks t SET upstream_cancel = 'asked', upstream_cancel_at = NULL, updated_at = now()
       FROM batches b
      WHERE t.batch_id = $1 AND b.id = t.batch_id AND t.status IN ('pending', 'queued', 'running') AND t.upstream_request_id IS NOT NULL
        AND t.upstream_batch_id IS NULL AND t.upstream_cancel IS NULL AND COALESCE(b.routes -> t.route_index, b.provider)->>'type' = ANY($2::text[])
      RETURNING t.id`,
    [batchId, UPSTREAM_CANCEL_TYPES],
  );
  return marked.length;
}

/**
 * The cancel of a batch (POST /v1/batches/{id}/cancel): one transaction that locks the batch,
 * then cancels and refunds every task not yet in its provider's hands (cancelUnsentTasks),
 * and marks for their upstream's cancel those a queue upstream with a cancel has accepted
 * (markUpstreamCancels; the generators are signalled to send them). Other tasks already sent
 * finish normally; the batch is done when the last of them settles (or at
 * once when none is left). A worker that took a task but still waits for a slot finds it
 * cancelled when it tries to send it (TaskStateStore.send), and never sends it; a job of a
 * cancelled task delivered later claims nothing.
 */
@Injectable()
export class BatchCancellation {
  private readonly writes: FencedWrites;

  constructor(
    @InjectDataSource() db: DataSource,
    private readonly billing: BillingService,
    changes: BatchChangePublisher,
    private readonly upstreamCancels: UpstreamCancelSignal,
    @Optional() @Inject(TASK_OUTCOME_HOOK) outcomes: TaskOutcomeHook | null = null,
  ) {
    this.writes = new FencedWrites(db, changes, outcomes);
  }

  /**
   * Cancels the account's batch. Another account's (or no) batch: not_found. A batch already
   * cancelled: null, nothing changes. A batch that finished without a cancel:
   * batch_not_cancellable.
   */
  cancel(accountId: string, batchId: string): Promise<CancelledTasks | null> {
    return this.writes
      .inTransaction(batchId, async (m) => {
        const [batch] = await queryRows<{ cancelled_at: Date | null; finished_at: Date | null }>(
          m,
          `SELECT cancelled_at, finished_at FROM batches WHERE id = $1 AND account_id = $2 FOR UPDATE`,
          [batchId, accountId],
        );
        if (!batch) throw notFound('Batch');
        if (batch.cancelled_at) return null;
        if (batch.finished_at) {
          throw new KilnError(ErrorCode.BatchNotCancellable, 'This batch has already finished; there is nothing left to cancel', {
            batchId,
          });
        }
        const cancelled = await cancelUnsentTasks(m, this.billing, batchId, undefined, this.writes);
        return { ...cancelled, cancelling: await markUpstreamCancels(m, batchId) };
      })
      .then((cancelled) => {
        if (cancelled?.cancelling) this.upstreamCancels.signal();
        return cancelled;
      });
  }
}
