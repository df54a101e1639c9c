import { DataSource } from 'typeorm';
import { PreparedStatement, queryPrepared, TaskEntity, TaskStatus } from '@app/database';
import { addToCounts, emptyCounts, TaskCounts } from './batch-status';

/** A task of a new batch, as its creation writes it. */
export interface NewTask {
  id: string;
  /** Position in the batch, 0-based: prompt order, then reference order, then copy index. */
  seq: number;
  /** Index into the batch's prompts. */
  promptIndex: number;
  refUploadIds: string[];
  seed: number;
}

/** The task columns clients see, plus seq, its place in the fan-out. */
export type TaskView = Pick<
  TaskEntity,
  'id' | 'batchId' | 'seq' | 'prompt' | 'status' | 'progress' | 'resultUrl' | 'error' | 'errorCode' | 'resultWidth' | 'resultHeight'
> & {
  /** Its cancel was asked of its upstream and not yet answered (upstream_cancel asked or sending); the api's reads only. */
  cancelling?: boolean;
  /**
   * When a worker first took it, and when it ended (Unix ms; null until then); the api's reads
   * and the progress stream only. Read as numbers (TASK_TIMES_SQL), not dates.
   */
  startedAt?: number | null;
  finishedAt?: number | null;
};

/**
 * A task's start and end as Unix ms (truncated, as a Date would hold them) under the TaskView
 * names. Read as timestamps, pg parsed two dates per task: 11.5 % of the api's busy time
 * polling a 100-task batch (bench/findings.md); a float8 is a parseFloat.
 */
export const TASK_TIMES_SQL = `floor(extract(epoch FROM started_at) * 1000)::float8 AS "startedAt",
                floor(extract(epoch FROM finished_at) * 1000)::float8 AS "finishedAt"`;

/** A running task whose cancel was asked of its upstream and not yet answered. */
const CANCELLING_SQL = `(status = 'running' AND COALESCE(upstream_cancel IN ('asked', 'sending'), false))`;

/**
 * A task's status as clients see it: `running` only once it is in its provider's hands; a
 * task its worker took but that still waits for a model or render slot shows `queued`. An
 * economy task in an upstream batch (upstream_batch_id set) is in its provider's hands.
 */
const SHOWN_STATUS_SQL = `CASE WHEN status = 'running' AND sent_at IS NULL AND upstream_batch_id IS NULL THEN 'queued' ELSE status END`;

/**
 * The polling endpoint's task read (its hot path): one constant statement for only the
 * columns the response shows, aliased to the field names so no entity is hydrated.
 */
export async function selectTaskViews(db: DataSource, batchId: string): Promise<TaskView[]> {
  return queryPrepared<TaskView>(db, SELECT_TASK_VIEWS, [batchId]);
}

/** Every full poll runs it: prepared once per connection. */
const SELECT_TASK_VIEWS: PreparedStatement = {
  name: 'kiln_select_task_views_v4',
  text: `SELECT id, batch_id AS "batchId", seq, prompt, ${SHOWN_STATUS_SQL} AS status, progress, result_url AS "resultUrl", error,
                error_code AS "errorCode", result_width AS "resultWidth", result_height AS "resultHeight", ${CANCELLING_SQL} AS cancelling,
                ${TASK_TIMES_SQL}
           FROM tasks WHERE batch_id = $1 ORDER BY seq`,
};

/** The stored result object of each of a batch's tasks (null when it has none, or no longer has one). */
export async function selectResultKeys(db: DataSource, batchId: string): Promise<Map<string, string | null>> {
  const rows: { id: string; key: string | null }[] = await db.query(`SELECT id, result_key AS key FROM tasks WHERE batch_id = $1`, [
    batchId,
  ]);
  return new Map(rows.map((r) => [r.id, r.key]));
}

/** Task counts of each batch, in one query. */
export async function countTasksByBatch(db: DataSource, batchIds: string[]): Promise<Map<string, TaskCounts>> {
  const counts = new Map<string, TaskCounts>();
  if (batchIds.length === 0) return counts;
  const rows: { batch_id: string; status: TaskStatus; n: number; cancelling: number }[] = await db.query(
    `SELECT batch_id, ${SHOWN_STATUS_SQL} AS status, count(*)::int AS n, count(*) FILTER (WHERE ${CANCELLING_SQL})::int AS cancelling
       FROM tasks WHERE batch_id = ANY($1::uuid[]) GROUP BY 1, 2`,
    [batchIds],
  );
  for (const r of rows) {
    const c = counts.get(r.batch_id) ?? emptyCounts();
    c.cancelling = (c.cancelling ?? 0) + r.cancelling;
    counts.set(r.batch_id, addToCounts(c, r.status, r.n));
  }
  return counts;
}

/**
 * Results of tasks finished before `cutoff` whose objects are still stored, oldest first: what
 * the retention sweep removes. A result's row keeps its URL (which then answers 404).
 */
export async function selectExpiredResults(db: DataSource, cutoff: Date, limit: number): Promise<{ id: string; key: string }[]> {
  return db.query(
    `SELECT id, result_key AS key FROM tasks WHERE result_key IS NOT NULL AND finished_at < $1 ORDER BY finished_at LIMIT $2`,
    [cutoff, limit],
  );
}

/** Forgets the result objects of these tasks once the retention sweep has removed them. */
export async function clearResultKeys(db: DataSource, taskIds: string[]): Promise<void> {
  await db.query(`UPDATE tasks SET result_key = NULL WHERE id = ANY($1::uuid[])`, [taskIds]);
}

/**
 * Each of a batch's tasks' queue-upstream request id (routes of a queue type), for operators
 * only: account holders never see it. Tasks without one are absent.
 */
export async function selectUpstreamRequestIds(db: DataSource, batchId: string): Promise<Map<string, string>> {
  const rows: { id: string; request_id: string }[] = await db.query(
    `SELECT id, upstream_request_id AS request_id FROM tasks WHERE batch_id = $1 AND upstream_request_id IS NOT NULL`,
    [batchId],
  );
  return new Map(rows.map((r) => [r.id, r.request_id]));
}

/**
 * Each task's route (operators only): its place in its batch's chain and that route's type.
 * A succeeded task's is the route that made its image; another's, where its attempts go.
 */
export async function selectTaskRoutes(db: DataSource, batchId: string): Promise<Map<string, { index: number; type: string }>> {
  const rows: { id: string; route_index: number; type: string }[] = await db.query(
    `SELECT t.id, t.route_index, COALESCE(b.routes -> t.route_index, b.provider) ->> 'type' AS type
       FROM tasks t JOIN batches b ON b.id = t.batch_id WHERE t.batch_id = $1`,
    [batchId],
  );
  return new Map(rows.map((r) => [r.id, { index: Number(r.route_index), type: r.type }]));
}
