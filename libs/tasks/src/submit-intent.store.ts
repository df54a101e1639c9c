import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PreparedStatement, queryPrepared, queryRows } from '@app/database';
import { Fence, lockBatchesInIdOrder, MAX_GROUP, retryingDeadlocks, statusIs } from './fenced-write';
import { groupWrites } from './group-writes';

/** A submit that was about to be sent and whose answer was never recorded: the upstream may have taken it. */
export interface SubmitIntent {
  /** When it was about to be sent (PostgreSQL's clock). */
  at: Date;
  /** `at` exactly as stored (microseconds; a Date keeps milliseconds): what names this intent to UpstreamWaitStore.handOff. */
  stamp: string;
  /** What finds the request again upstream, as the route's type wrote it. */
  key: Record<string, unknown>;
}

/** An intent to record. */
interface Intent {
  fence: Fence;
  key: Record<string, unknown>;
}

/**
 * A group of intents, fenced, in one statement and one synchronous commit (set_config(...,
 * true): this transaction only; the generator's sessions commit asynchronously otherwise).
 * Evaluated for every row marked, so whenever one is; a group that marks none writes nothing
 * that needs the flush. The batches are locked first, in id order, as every grouped task write
 * does (fenced-write.ts), so a group cannot deadlock a cancel or another group; nothing is
 * bumped (nothing a client sees changes). $1 task ids, $2 attempts, $3 keys, $4 batch ids.
 */
const RECORD_GROUP: PreparedStatement = {
  name: 'kiln_submit_intent_group',
  text: `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::jsonb[]) AS i(id, attempt, intent)
), locked AS (
  ${lockBatchesInIdOrder('id = ANY($4::uuid[])')}
), marked AS (
  UPDATE tasks t SET submit_intent_at = now(), submit_intent = i.intent
    FROM input i
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
     AND t.upstream_request_id IS NULL AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.submit_intent_at
)
SELECT id, attempts, submit_intent_at::text AS stamp, set_config('synchronous_commit', 'on', true) AS durable FROM marked`,
};

/**
 * The intent to submit to a queue upstream, committed before the call (synchronously, as the
 * submit's answer is: a PostgreSQL crash must not undo it), so that a crash between the call
 * and the recording of its answer leaves a trace: a task with an intent and no request id.
 * The next attempt looks it up upstream where the route's type can, else applies the route's
 * `onUnknownSubmit` (libs/generation's usecases/submit-with-intent.ts). Nothing a client sees
 * changes: no batch version is bumped. A claim reads the intent with the task
 * (ClaimedTask.submitIntent), so a first attempt asks nothing more before it submits.
 */
@Injectable()
export class SubmitIntentStore {
  /**
   * Group-committed: the submits of a generator come in bursts (a route's slots freed
   * together), and one statement per intent was most of the generator's statements in the
   * upstream-queue bench (2 of 3, with the doubt's read), its event loop saturated
   * (bench/findings.md, 2026-11-28 session 5). Each submit still waits for its own intent's
   * commit, flushed, before its call.
   */
  private readonly recordOne = groupWrites((group: readonly Intent[]) => this.recordGroup(group), MAX_GROUP);

  constructor(@InjectDataSource() private readonly db: DataSource) {}

  /**
   * Records the intent of this attempt, durably (resolves once its commit is flushed); answers
   * its stamp (SubmitIntent.stamp), or null when the fence no longer holds (the call must not be made).
   */
  record(fence: Fence, key: Record<string, unknown>): Promise<string | null> {
    return this.recordOne({ fence, key });
  }

  /** The intent an earlier attempt (or this one) left without a recorded request; null when none. */
  async unanswered(fence: Fence): Promise<SubmitIntent | null> {
    const [row] = await queryRows<{ submit_intent_at: Date; stamp: string; submit_intent: Record<string, unknown> | null }>(
      this.db,
      `SELECT submit_intent_at, submit_intent_at::text AS stamp, submit_intent FROM tasks
        WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NULL AND submit_intent_at IS NOT NULL`,
      [fence.taskId, fence.attempt],
    );
    return row ? { at: new Date(row.submit_intent_at), stamp: row.stamp, key: row.submit_intent ?? {} } : null;
  }

  /**
   * The upstream answered that it did not take the request (or its doubt is settled): no
   * intent is left. Synchronous too (an error path, rare): a PostgreSQL crash undoing the
   * clear would make a `fail` route fail a task the upstream never took.
   */
  async clear(fence: Fence): Promise<void> {
    await queryRows(
      this.db,
      `WITH cleared AS (
         UPDATE tasks SET submit_intent_at = NULL, submit_intent = NULL
          WHERE id = $1 AND status = 'running' AND attempts = $2 AND submit_intent_at IS NOT NULL
          RETURNING id
       )
       SELECT id, set_config('synchronous_commit', 'on', true) AS durable FROM cleared`,
      [fence.taskId, fence.attempt],
    );
  }

  private async recordGroup(group: readonly Intent[]): Promise<(string | null)[]> {
    const rows = await retryingDeadlocks(() =>
      queryPrepared<{ id: string; attempts: number; stamp: string }>(this.db, RECORD_GROUP, [
        group.map((i) => i.fence.taskId),
        group.map((i) => i.fence.attempt),
        group.map((i) => JSON.stringify(i.key)),
        [...new Set(group.map((i) => i.fence.batchId))],
      ]),
    );
    const marked = new Map(rows.map((row) => [`${row.id}:${row.attempts}`, row.stamp]));
    // A fence twice in one group (a duplicate delivery) is answered once: the other run must not call.
    return group.map((i) => {
      const fence = `${i.fence.taskId}:${i.fence.attempt}`;
      const stamp = marked.get(fence) ?? null;
      marked.delete(fence);
      return stamp;
    });
  }
}
