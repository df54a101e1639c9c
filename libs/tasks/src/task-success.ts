import { BatchStatus, PreparedStatement, queryPrepared } from '@app/database';
import { tallyAssignments } from './batch-tally';
import {
  ENDED_TASK_COLUMNS,
  EndedRow,
  endedTaskOf,
  Fence,
  FencedWrites,
  lockBatchesInIdOrder,
  MAX_GROUP,
  retryingDeadlocks,
  statusIs,
  TallyResult,
} from './fenced-write';
import { groupWrites } from './group-writes';

/** A rendered and stored image, to be recorded as its task's success. */
export interface Success {
  fence: Fence;
  batchId: string;
  resultUrl: string;
  resultKey: string;
  /** The stored image's real pixel size. */
  width: number;
  height: number;
  previewUrl: string | null;
  /** What the upstream charged for it, in micro-dollars (its route's price); null: no price covers it (unpriced); absent: 0. */
  upstreamCostMicros?: number | null;
}

/**
 * Records a group of successes in one statement: each task's fenced update, then one tally
 * per batch. The batches are locked first and in id order, so two generators recording
 * successes of the same batches at once cannot deadlock. A task whose fence no longer holds
 * changes nothing and has no result row. $1 task ids, $2 attempts, $3 result URLs, $4 result
 * keys, $5 preview URLs (null where the run made none), $6 the tasks' batch ids, $7 and $8 the
 * results' widths and heights, $9 their upstream costs in micro-dollars.
 */
const SUCCEED_GROUP: PreparedStatement = {
  name: 'kiln_succeed_group',
  text: `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $7::int[], $8::int[], $9::bigint[])
    AS i(id, attempt, result_url, result_key, preview_url, width, height, cost_micros)
), locked AS (
  ${lockBatchesInIdOrder('id = ANY($6::uuid[])')}
), done AS (
  UPDATE tasks t SET status = 'succeeded', progress = 100, result_url = i.result_url, result_key = i.result_key,
         result_width = i.width, result_height = i.height, error = NULL, error_code = NULL,
         upstream_cost_micros = t.upstream_cost_micros + i.cost_micros, -- unpriced (NULL) stays unpriced
         finished_at = now(), updated_at = now()
    FROM input i
   -- t.id = ANY($1) as well as the join, and statusIs: the group's rows are found by primary
   -- key, not by scanning the running tasks (an economy batch has thousands running).
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id, i.preview_url, ${ENDED_TASK_COLUMNS}
), counted AS (
  SELECT batch_id, count(*)::int AS n, min(preview_url) AS new_preview FROM done GROUP BY batch_id
), tallied AS (
  UPDATE batches SET ${tallyAssignments({ succeeded: 'counted.n', failed: '0', cancelled: '0', refunded: '0', preview: 'counted.new_preview' })}
    FROM counted
   WHERE batches.id = counted.batch_id
  RETURNING batches.id, batches.status, batches.finished_at, batches.preview_url
)
SELECT done.*, tallied.status AS batch_status, tallied.finished_at, tallied.preview_url AS batch_preview_url
  FROM done JOIN tallied ON tallied.id = done.batch_id`,
};

/** Terminal success (`running -> succeeded`), group-committed with its batches' tallies. */
export class TaskSuccesses {
  private readonly succeedOne = groupWrites((group: readonly Success[]) => this.succeedGroup(group), MAX_GROUP);

  constructor(private readonly writes: FencedWrites) {}

  /**
   * Terminal success: the task and its batch's tally. Returns null when the fence no longer
   * holds (another worker took the task over), in which case nothing changed.
   */
  succeed(success: Success): Promise<TallyResult | null> {
    return this.succeedOne(success);
  }

  private async succeedGroup(group: readonly Success[]): Promise<(TallyResult | null)[]> {
    type Row = EndedRow & { attempts: number; batch_status: BatchStatus; finished_at: Date | null; batch_preview_url: string | null };
    const batchIds = [...new Set(group.map((s) => s.batchId))];
    const params = [
      group.map((s) => s.fence.taskId),
      group.map((s) => s.fence.attempt),
      group.map((s) => s.resultUrl),
      group.map((s) => s.resultKey),
      group.map((s) => s.previewUrl),
      batchIds,
      group.map((s) => s.width),
      group.map((s) => s.height),
      group.map((s) => (s.upstreamCostMicros === undefined ? 0 : s.upstreamCostMicros)),
    ];
    // With someone listening, the outcomes go into the outbox in the same transaction; the
    // group stays one transaction whatever its size, so 1,000 successes cost a handful of
    // outbox statements, not 1,000.
    const listening = await this.writes.listening(batchIds);
    const rows = listening
      ? await retryingDeadlocks(() =>
          this.writes.db.transaction(async (m) => {
            const written = await queryPrepared<Row>(m, SUCCEED_GROUP, params);
            const finished = [...new Set(written.filter((r) => r.finished_at !== null).map((r) => r.batch_id))];
            await this.writes.record(m, { ended: written.map(endedTaskOf), finishedBatchIds: finished });
            return written;
          }),
        )
      : await this.writes.grouped<Row>(SUCCEED_GROUP, params);
    // Finished batches at once (a client may be waiting for exactly that), the rest gathered.
    this.writes.announce(rows.filter((row) => row.finished_at === null).map((row) => row.batch_id));
    this.writes.announceFinished(rows.filter((row) => row.finished_at !== null).map((row) => row.batch_id));
    // Keyed by attempt too: a stale attempt of a task may share the group with the current one.
    const byAttempt = new Map(rows.map((row) => [`${row.id}:${row.attempts}`, row]));
    const finishReported = new Set<string>();
    return group.map((s) => {
      const row = byAttempt.get(`${s.fence.taskId}:${s.fence.attempt}`);
      if (!row) return null;
      const finished = row.finished_at !== null && !finishReported.has(s.batchId);
      if (finished) finishReported.add(s.batchId);
      return { status: row.batch_status, finished, previewUrl: row.batch_preview_url };
    });
  }
}
