import { EntityManager } from 'typeorm';
import { BillingService, RefundTask } from '@app/billing';
import { BatchStatus, pgError, queryRows, TaskErrorCode } from '@app/database';
import { tallyAssignments } from './batch-tally';
import {
  ENDED_TASK_COLUMNS,
  EndedRow,
  endedTaskOf,
  Fence,
  FencedWrites,
  MAX_GROUP,
  retryingDeadlocks,
  statusIs,
  TallyResult,
} from './fenced-write';

/** One task of a grouped failure (failMany): its fence, and what its failure says. */
export interface Failure {
  fence: Fence;
  message: string;
  code: TaskErrorCode;
}

/** What fail answers for a task it failed: its batch's tally, and what the task was refunded. */
export type FailResult = TallyResult & { refunded: number };

/**
 * failMany's fenced update: $1 task ids, $2 attempts, $3 messages, $4 error codes, one per
 * task; $5 the batches, already locked. A task whose fence no longer holds (ended, or taken by
 * a later attempt) is left alone and has no row.
 */
const FAIL_GROUP_SQL = `
UPDATE tasks t SET status = 'failed', error = i.message, error_code = i.code, finished_at = now(), updated_at = now()
  FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[]) AS i(id, attempt, message, code)
 -- t.id = ANY($1) as well as the join, and statusIs: the rows are found by primary key.
 WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
   AND t.batch_id = ANY($5::uuid[])
RETURNING t.id, t.attempts, t.batch_id, ${ENDED_TASK_COLUMNS}`;

/** failMany's tally: $1 batches, $2 tasks failed in each, $3 credits refunded in each. */
const TALLY_FAILED_SQL = `
UPDATE batches SET ${tallyAssignments({ succeeded: '0', failed: 'c.failed', cancelled: '0', refunded: 'c.credited', preview: 'NULL::text' })}
  FROM unnest($1::uuid[], $2::int[], $3::int[]) AS c(batch_id, failed, credited)
 WHERE batches.id = c.batch_id
RETURNING batches.id, batches.status, batches.finished_at, batches.preview_url`;

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
   * upstream billed for the failed request (0 unless its type bills failures; null when it
   * billed one no price covers, which makes the task's cost unpriced). Returns null when
   * the fence no longer holds.
   */
  fail(fence: Fence, message: string, code: TaskErrorCode, upstreamCostMicros: number | null = 0): Promise<FailResult | null> {
    return this.writes.inTransaction(fence.batchId, async (m) => {
      const [batch] = await queryRows<{ unit_cost: number }>(m, `SELECT unit_cost FROM batches WHERE id = $1 FOR UPDATE`, [fence.batchId]);
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

  /**
   * fail for many tasks at once (no upstream cost: the economy tier's unrun and refused
   * tasks), answering one result per failure in order, null where the fence no longer holds.
   * Each chunk of MAX_GROUP tasks is one transaction of a few statements whatever its size:
   * its batches locked in id order, the fenced update of its tasks, their refunds
   * (BillingService.refundTasks), one tally per batch and the outbox; so a crash leaves a
   * chunk all written or not at all, and a task ended meanwhile (by the window's end, a cancel,
   * a later attempt) is neither failed nor refunded again. Of a batch this finishes, only one
   * task's result says `finished`.
   */
  async failMany(failures: readonly Failure[]): Promise<(FailResult | null)[]> {
    const results: (FailResult | null)[] = [];
    for (let start = 0; start < failures.length; start += MAX_GROUP) {
      results.push(...(await this.failChunk(failures.slice(start, start + MAX_GROUP))));
    }
    return results;
  }

  private async failChunk(chunk: readonly Failure[]): Promise<(FailResult | null)[]> {
    type Ended = EndedRow & { attempts: number };
    type Tallied = { id: string; status: BatchStatus; finished_at: Date | null; preview_url: string | null };
    const batchIds = [...new Set(chunk.map((f) => f.fence.batchId))].sort();
    const written = await retryingDeadlocks(() =>
      this.writes.db.transaction(async (m) => {
        const batches = await queryRows<{ id: string; unit_cost: number }>(
          m,
          `SELECT id, unit_cost FROM batches WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
          [batchIds],
        );
        const unitCost = new Map(batches.map((b) => [b.id, b.unit_cost]));
        const ended = await queryRows<Ended>(m, FAIL_GROUP_SQL, [
          chunk.map((f) => f.fence.taskId),
          chunk.map((f) => f.fence.attempt),
          chunk.map((f) => f.message),
          chunk.map((f) => f.code),
          batches.map((b) => b.id),
        ]);
        if (ended.length === 0) return null;
        const refunded = await this.billing.refundTasks(
          m,
          ended.map((row) => ({
            accountId: row.ended_account_id,
            batchId: row.batch_id,
            taskId: row.id,
            amount: unitCost.get(row.batch_id)!,
          })),
        );
        const perBatch = new Map<string, { failed: number; credited: number }>();
        for (const row of ended) {
          const counted = perBatch.get(row.batch_id) ?? { failed: 0, credited: 0 };
          counted.failed++;
          if (refunded.has(row.id)) counted.credited += unitCost.get(row.batch_id)!;
          else this.writes.logger.warn(`Task ${row.id} was already refunded; not refunding it again`);
          perBatch.set(row.batch_id, counted);
        }
        const tallied = await queryRows<Tallied>(m, TALLY_FAILED_SQL, [
          [...perBatch.keys()],
          [...perBatch.values()].map((c) => c.failed),
          [...perBatch.values()].map((c) => c.credited),
        ]);
        await this.writes.recordOutcomes(m, [...perBatch.keys()], {
          ended: ended.map(endedTaskOf),
          finishedBatchIds: tallied.filter((t) => t.finished_at !== null).map((t) => t.id),
        });
        return { ended, refunded, unitCost, tallied: new Map(tallied.map((t) => [t.id, t])) };
      }),
    );
    if (!written) return chunk.map(() => null);
    this.writes.announce(written.tallied.keys());
    // Keyed by attempt too, as successes are: a stale attempt of a task may share the chunk with the current one.
    const byAttempt = new Map(written.ended.map((row) => [`${row.id}:${row.attempts}`, row]));
    const finishReported = new Set<string>();
    return chunk.map((f) => {
      const row = byAttempt.get(`${f.fence.taskId}:${f.fence.attempt}`);
      if (!row) return null;
      byAttempt.delete(`${f.fence.taskId}:${f.fence.attempt}`);
      const batch = written.tallied.get(row.batch_id)!;
      const finished = batch.finished_at !== null && !finishReported.has(row.batch_id);
      if (finished) finishReported.add(row.batch_id);
      const refunded = written.refunded.has(row.id) ? written.unitCost.get(row.batch_id)! : 0;
      return { status: batch.status, finished, previewUrl: batch.preview_url, refunded };
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
