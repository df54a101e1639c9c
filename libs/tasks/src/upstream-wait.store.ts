import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { PreparedStatement, queryPrepared, queryRows } from '@app/database';
import { UPSTREAM_CANCEL_TYPES } from '@app/providers';
import { BatchChangePublisher } from './batch-changes';
import { UpstreamCancelSignal } from './upstream-cancel.store';
import { groupWrites } from './group-writes';
import { Fence, statusIs } from './fenced-write';
import { ClaimedTask, claimedTaskOf, ClaimedTaskRow, RenderBatchRow, renderBatchOf } from './task-claim';

/**
 * Who holds a waiting task: a generator's poller (by its id) until its lease runs out, or
 * nobody yet (poller null: the first poller with room takes it).
 */
export interface WaitHold {
  poller: string | null;
  leaseMs: number;
  /** Not polled before this. */
  pollAt: Date;
}

/** A submit's answer to record. */
export interface Submission {
  fence: Fence;
  requestId: string;
  handle: Record<string, string>;
  hold: WaitHold;
}

/** The progress a task shows once its upstream has accepted it. */
const SUBMITTED_PROGRESS = 10;

/**
 * The batches of recorded answers, locked first and in id order (the order of every task
 * write), each with whether a request accepted now must be cancelled upstream (its batch was
 * cancelled while the submit was in flight, on a type that has a cancel: `cancelTypes`).
 */
const lockedForRecord = (where: string, cancelTypes: string): string =>
  `SELECT id, cancelled_at IS NOT NULL AND provider->>'type' = ANY(${cancelTypes}::text[]) AS cancel_upstream
    FROM batches WHERE ${where} ORDER BY id FOR UPDATE`;

/**
 * What recording a submit's answer sets on its task (t, its batch in `locked`): the request,
 * its upstream cancel when the batch was cancelled meanwhile, the waiting state, sent and its
 * progress. One list for RECORD_GROUP and HAND_OFF, so the two record the same.
 */
const recordedColumns = (v: { requestId: string; handle: string; pollAt: string; poller: string; leaseUntil: string }): string =>
  `upstream_request_id = ${v.requestId}, upstream_handle = ${v.handle}, upstream_submitted_at = now(),
         upstream_cancel = CASE WHEN (SELECT cancel_upstream FROM locked WHERE locked.id = t.batch_id) THEN 'asked' END,
         upstream_cancel_at = NULL,
         upstream_poll_at = ${v.pollAt}, upstream_poller = ${v.poller}, upstream_lease_until = ${v.leaseUntil},
         sent_at = COALESCE(t.sent_at, now()), progress = GREATEST(t.progress, ${SUBMITTED_PROGRESS}), updated_at = now()`;

/**
 * Records a group of submits' answers, fenced, each with its move into the waiting state:
 * the upstream's request id and handle, when it was submitted, when to poll it and which
 * poller holds it. The batches are locked first and in id order (the order of every task
 * write), and their versions bumped (progress moves). A request accepted after its batch was
 * cancelled (its submit was in flight) is marked for its upstream's cancel, as the cancel
 * marks those accepted before it (markUpstreamCancels). $1 task ids, $2 attempts, $3
 * request ids, $4 handles, $5 batch ids, $6 pollers (null: none yet), $7 poll times, $8
 * lease ms, $9 the types whose upstream has a cancel.
 */
const RECORD_GROUP_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::jsonb[], $6::text[], $7::timestamptz[], $8::int[])
    AS i(id, attempt, request_id, handle, poller, poll_at, lease_ms)
), locked AS (
  ${lockedForRecord('id = ANY($5::uuid[])', '$9')}
), recorded AS (
  UPDATE tasks t SET ${recordedColumns({
    requestId: 'i.request_id',
    handle: 'i.handle',
    pollAt: 'i.poll_at',
    poller: 'i.poller',
    leaseUntil: "CASE WHEN i.poller IS NULL THEN NULL ELSE now() + i.lease_ms * interval '1 millisecond' END",
  })}
    FROM input i
   -- Found by primary key whatever the statistics say (statusIs).
   WHERE t.id = i.id AND t.id = ANY($1::uuid[]) AND ${statusIs('t', 'running')} AND t.attempts = i.attempt
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id, t.upstream_cancel
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM recorded)
)
-- Evaluated for every task recorded, so whenever one is: see RECORD_GROUP.
SELECT id, attempts, batch_id, upstream_cancel, set_config('synchronous_commit', 'on', true) AS durable FROM recorded`;

/**
 * Commits synchronously (set_config(..., true): this transaction only), though the generator's
 * sessions commit asynchronously (DatabaseModuleOptions.asyncCommit): the upstream has taken
 * the request and bills it, and an id a PostgreSQL crash undid would have the task submit, and
 * pay, again. One WAL flush per group.
 */
const RECORD_GROUP: PreparedStatement = { name: 'kiln_upstream_record_group_v3', text: RECORD_GROUP_SQL };

/**
 * A submit's answer its own attempt could not record (taken over meanwhile: its lease ran out
 * while PostgreSQL was away), given to the task's current attempt while that one has not
 * submitted: the intent is still the one this submit answers ($5, its stamp) and no request is
 * recorded. The task goes to the pollers (no poller yet); the current attempt's own submit then
 * finds a request recorded and is not sent (SubmitIntentStore.record). Batch first, as every
 * task write; synchronous, as RECORD_GROUP. $1 task, $2 batch, $3 request id, $4 handle, $6
 * the types whose upstream has a cancel, $7 when to poll.
 */
const HAND_OFF_SQL = `
WITH locked AS (
  ${lockedForRecord('id = $2', '$6')}
), handed AS (
  UPDATE tasks t SET ${recordedColumns({ requestId: '$3', handle: '$4::jsonb', pollAt: '$7', poller: 'NULL', leaseUntil: 'NULL' })}
   WHERE t.id = $1 AND t.status = 'running' AND t.upstream_request_id IS NULL AND t.submit_intent_at = $5::timestamptz
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id, t.upstream_cancel
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM handed)
)
SELECT id, attempts, batch_id, upstream_cancel, set_config('synchronous_commit', 'on', true) AS durable FROM handed`;

/** The claim's columns for a waiting task, with its batch's snapshot (as CLAIM_GROUP_SQL reads them). */
const WAITING_COLUMNS = `t.id, t.batch_id, t.account_id, t.seq, t.prompt, t.seed, t.ref_upload_ids, t.attempts, t.result_token,
       t.upstream_request_id, t.upstream_handle, t.upstream_submitted_at, t.upstream_poll_at, t.route_index,
       b.id AS batch_found, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.output_format,
       b.routes, b.failover, COALESCE(b.routes -> t.route_index, b.provider) AS provider,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background`;

/** A row of WAITING_COLUMNS: its batch columns are a CLAIM_GROUP row's, every one a render needs. */
interface WaitingRow extends ClaimedTaskRow, RenderBatchRow {
  batch_found: string | null;
  upstream_poll_at: Date;
}

/** Most items one grouped statement carries. */
const MAX_GROUP = 250;

/**
 * The waiting state of tasks on queue upstreams (routes of a queue type): a task the upstream
 * has accepted stays `running` (sent: a cancel leaves it to finish), with its request id
 * recorded before Kiln waits on it, while no worker holds it: a generator's poller does,
 * under a lease it renews, so another generator's poller takes over the tasks of one that
 * died. A claim (a redelivered job, a crash recovery, a retry) takes the task out of the
 * pollers' hands and finds the request to resume (ClaimedTask.upstream).
 *
 * Writes that a client can see (the submit's progress) lock the batch first and bump its
 * version, as every task write does; lease bookkeeping changes nothing a client sees and
 * locks task rows only, skipping those locked by others.
 */
@Injectable()
export class UpstreamWaitStore {
  private readonly recordOne = groupWrites((group: readonly Submission[]) => this.recordGroup(group), MAX_GROUP);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly changes: BatchChangePublisher,
    private readonly upstreamCancels: UpstreamCancelSignal,
  ) {}

  /**
   * The upstream accepted the task's request: record it and hand the task to the pollers.
   * False when the fence no longer holds (nothing written).
   */
  recordSubmission(submission: Submission): Promise<boolean> {
    return this.recordOne(submission);
  }

  /**
   * The answer of a submit whose attempt was taken over before it could record it, given to
   * the task's current attempt if that one has not submitted since (HAND_OFF_SQL): the
   * request is paid for, and without this the current attempt would submit, and pay, again.
   * Answers the attempt it went to, or null (nothing written: the task moved on, submitted
   * again, or finished).
   */
  async handOff(submission: Omit<Submission, 'hold'>, intent: string, pollAt: Date): Promise<number | null> {
    const [row] = await queryRows<{ id: string; attempts: number; batch_id: string; upstream_cancel: string | null }>(
      this.db,
      HAND_OFF_SQL,
      [
        submission.fence.taskId,
        submission.fence.batchId,
        submission.requestId,
        JSON.stringify(submission.handle),
        intent,
        UPSTREAM_CANCEL_TYPES,
        pollAt,
      ],
    );
    if (!row) return null;
    this.changes.announce([row.batch_id]);
    if (row.upstream_cancel === 'asked') this.upstreamCancels.signal();
    return row.attempts;
  }

  /**
   * A claim found the task's upstream request: back into the waiting state under `hold`,
   * without a new submit. False when the fence no longer holds.
   */
  async resume(fence: Fence, hold: WaitHold): Promise<boolean> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `UPDATE tasks SET upstream_poll_at = $3, upstream_poller = $4,
              upstream_lease_until = CASE WHEN $4::text IS NULL THEN NULL ELSE now() + $5::int * interval '1 millisecond' END,
              sent_at = COALESCE(sent_at, now()), updated_at = now()
        WHERE id = $1 AND status = 'running' AND attempts = $2 AND upstream_request_id IS NOT NULL
        RETURNING id`,
      [fence.taskId, fence.attempt, hold.pollAt, hold.poller, hold.leaseMs],
    );
    return rows.length > 0;
  }

  /**
   * The upstream failed the request itself (its own failure answer, a request it no longer
   * knows): the next attempt submits anew, with no submit in doubt. Out of the waiting state
   * too, and, for a chain's task that fails over, onto its next route (`routeIndex`) in the
   * same write: as two writes, a crash between them left the task on the failing route with
   * no request, and its next attempt submitted there again. False when the fence no longer holds.
   */
  async forget(fence: Fence, routeIndex: number | null = null): Promise<boolean> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `UPDATE tasks SET upstream_request_id = NULL, upstream_handle = NULL, upstream_submitted_at = NULL,
              submit_intent_at = NULL, submit_intent = NULL,
              upstream_poll_at = NULL, upstream_poller = NULL, upstream_lease_until = NULL, updated_at = now(),
              route_index = COALESCE($3::int, route_index)
        WHERE id = $1 AND status = 'running' AND attempts = $2
        RETURNING id`,
      [fence.taskId, fence.attempt, routeIndex],
    );
    return rows.length > 0;
  }

  /**
   * Up to `limit` waiting tasks that no poller holds (never held, released at a shutdown, or
   * a dead poller's lease ran out), soonest poll first, leased to `poller`. Rows another
   * statement holds are skipped, not waited for.
   */
  async lease(poller: string, leaseMs: number, limit: number): Promise<(ClaimedTask & { pollAt: Date })[]> {
    if (limit <= 0) return [];
    const rows = await queryRows<WaitingRow>(
      this.db,
      `WITH free AS (
         SELECT id FROM tasks
          WHERE status = 'running' AND upstream_poll_at IS NOT NULL
            AND (upstream_lease_until IS NULL OR upstream_lease_until < now())
          ORDER BY upstream_poll_at LIMIT $3 FOR UPDATE SKIP LOCKED
       ), taken AS (
         UPDATE tasks t SET upstream_poller = $1, upstream_lease_until = now() + $2::int * interval '1 millisecond'
          WHERE t.id IN (SELECT id FROM free)
          RETURNING t.*
       )
       SELECT ${WAITING_COLUMNS}
         FROM taken t
         LEFT JOIN batches b ON b.id = t.batch_id
         LEFT JOIN models m ON m.key = b.model`,
      [poller, leaseMs, limit],
    );
    // The batch read explicitly (renderBatchOf takes a whole RenderBatchRow): a row short of a
    // column a render needs no longer passes as a bare ClaimedTaskRow.
    return rows.map((row) => ({
      ...claimedTaskOf(row, row.batch_found ? renderBatchOf(row) : null),
      pollAt: new Date(row.upstream_poll_at),
    }));
  }

  /**
   * Extends the poller's leases on the tasks it holds in memory (`taskIds`: one it dropped
   * is left to expire, for another poller to take); answers those it still holds, with their
   * attempts, so the poller drops the ones a claim took back meanwhile.
   */
  async renew(poller: string, leaseMs: number, taskIds: readonly string[]): Promise<Map<string, number>> {
    if (taskIds.length === 0) return new Map();
    const rows = await queryRows<{ id: string; attempts: number }>(
      this.db,
      `WITH mine AS (
         SELECT id FROM tasks
          WHERE id = ANY($3::uuid[]) AND upstream_poller = $1 AND status = 'running' AND upstream_poll_at IS NOT NULL
          ORDER BY id FOR UPDATE SKIP LOCKED
       )
       UPDATE tasks t SET upstream_lease_until = now() + $2::int * interval '1 millisecond'
        WHERE t.id IN (SELECT id FROM mine)
        RETURNING t.id, t.attempts`,
      [poller, leaseMs, taskIds],
    );
    return new Map(rows.map((r) => [r.id, r.attempts]));
  }

  /**
   * Gives every waiting task the poller holds back (at a shutdown), to be polled from
   * `pollAt` by whichever poller takes it first. Answers how many.
   */
  async release(poller: string, pollAt: Date): Promise<number> {
    const rows = await queryRows<{ id: string }>(
      this.db,
      `UPDATE tasks SET upstream_poller = NULL, upstream_lease_until = NULL, upstream_poll_at = GREATEST(upstream_poll_at, $2)
        WHERE upstream_poller = $1 AND status = 'running' AND upstream_poll_at IS NOT NULL
        RETURNING id`,
      [poller, pollAt],
    );
    return rows.length;
  }

  private async recordGroup(group: readonly Submission[]): Promise<boolean[]> {
    const rows = await queryPrepared<{ id: string; attempts: number; batch_id: string; upstream_cancel: string | null }>(
      this.db,
      RECORD_GROUP,
      [
        group.map((s) => s.fence.taskId),
        group.map((s) => s.fence.attempt),
        group.map((s) => s.requestId),
        group.map((s) => JSON.stringify(s.handle)),
        [...new Set(group.map((s) => s.fence.batchId))],
        group.map((s) => s.hold.poller),
        group.map((s) => s.hold.pollAt),
        group.map((s) => s.hold.leaseMs),
        UPSTREAM_CANCEL_TYPES,
      ],
    );
    this.changes.announce(rows.map((row) => row.batch_id));
    if (rows.some((row) => row.upstream_cancel === 'asked')) this.upstreamCancels.signal();
    const recorded = new Set(rows.map((row) => `${row.id}:${row.attempts}`));
    return group.map((s) => recorded.delete(`${s.fence.taskId}:${s.fence.attempt}`));
  }
}
