import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BillingService, RefundTask } from '@app/billing';
import { BatchStatus, pgError, PreparedStatement, ProviderRoute, queryPrepared, queryRows, TaskErrorCode } from '@app/database';
import { newObjectToken } from '@app/storage';
import { BatchChangePublisher } from './batch-changes';
import { batchStatusFromCounts } from './batch-status';
import { tallyAssignments } from './batch-tally';
import { cancelUnsentTasks } from './task-cancellation';
import { groupWrites } from './group-writes';
import { EndedTask, TASK_OUTCOME_HOOK, TaskOutcomeHook } from './task-outcome.hook';
import type { TaskView } from './task-rows';

/** A claimed attempt: every later write is conditioned on (status = 'running', attempts = attempt). */
export interface Fence {
  taskId: string;
  attempt: number;
  /** The task's batch: every fenced write locks it first (see TaskStateStore). */
  batchId: string;
}

/** What a give-back for a retry did. */
export type RequeueOutcome =
  /** `running -> queued`: the caller adds the job for the next attempt. */
  | 'requeued'
  /** The batch was cancelled meanwhile: the task is cancelled and refunded instead. */
  | 'cancelled'
  /** The fence no longer holds: nothing changed. */
  | null;

/** What a task's render needs of its batch: the batch's snapshot, read in the claim. */
export interface RenderBatch {
  id: string;
  model: string;
  aspectRatio: string;
  resolution: string;
  quality: string;
  background: string | null;
  outputFormat: 'png' | 'jpeg' | 'webp';
  provider: ProviderRoute;
  width: number;
  height: number;
  previewUrl: string | null;
  /** Catalog flags of the batch's model (false when the model row is gone). */
  supportsQuality: boolean;
  supportsBackground: boolean;
}

export interface ClaimedTask {
  id: string;
  batchId: string;
  accountId: string;
  seq: number;
  prompt: string;
  seed: number;
  refUploadIds: string[];
  /** Attempts including this one. */
  attempts: number;
  /** The random part of the task's result key, the same for every attempt. */
  resultToken: string;
  /** Null only if the batch row is gone (a manual repair): the run then fails as internal. */
  batch: RenderBatch | null;
}

export interface TallyResult {
  status: BatchStatus;
  /** This outcome finished the batch (of a group finishing it together, only one says so). */
  finished: boolean;
  previewUrl: string | null;
}

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
}

/** A progress report to write. */
interface Progress {
  fence: Fence;
  pct: number;
}

/** One task's tally: $1 batch, $2 succeeded, $3 failed, $4 refunded, $5 preview URL or null. */
const TALLY_SQL = `
UPDATE batches SET ${tallyAssignments({ succeeded: '$2', failed: '$3', cancelled: '0', refunded: '$4', preview: '$5::text' })}
WHERE id = $1
RETURNING status, finished_at, preview_url`;

/** The columns of an ended task that its outcome reports (EndedTask), prefixed `ended_`. */
const ENDED_TASK_COLUMNS = `t.account_id AS ended_account_id, t.seq AS ended_seq, t.prompt AS ended_prompt,
  t.status AS ended_status, t.progress AS ended_progress, t.result_url AS ended_result_url, t.error AS ended_error,
  t.error_code AS ended_error_code, t.result_width AS ended_result_width, t.result_height AS ended_result_height`;

/**
 * Records a group of successes in one statement: each task's fenced update, then one tally
 * per batch. The batches are locked first and in id order, so two generators recording
 * successes of the same batches at once cannot deadlock. A task whose fence no longer holds
 * changes nothing and has no result row. $1 task ids, $2 attempts, $3 result URLs, $4 result
 * keys, $5 preview URLs (null where the run made none), $6 the tasks' batch ids, $7 and $8 the
 * results' widths and heights.
 */
const SUCCEED_GROUP_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[], $3::text[], $4::text[], $5::text[], $7::int[], $8::int[])
    AS i(id, attempt, result_url, result_key, preview_url, width, height)
), locked AS (
  SELECT id FROM batches WHERE id = ANY($6::uuid[]) ORDER BY id FOR UPDATE
), done AS (
  UPDATE tasks t SET status = 'succeeded', progress = 100, result_url = i.result_url, result_key = i.result_key,
         result_width = i.width, result_height = i.height, error = NULL, error_code = NULL,
         finished_at = now(), updated_at = now()
    FROM input i
   WHERE t.id = i.id AND t.status = 'running' AND t.attempts = i.attempt
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
  FROM done JOIN tallied ON tallied.id = done.batch_id`;

/**
 * Takes a group of tasks for one attempt each and reads what their renders need, in one
 * statement: their batches locked first and in id order (as every task write after creation
 * does, the cancel included, so none of them can deadlock another), the fenced claims, the
 * batches' move out of `pending` and version bump, and the batch and model rows, read from
 * the statement's snapshot, which is all a render needs of them. A claimed task is not sent
 * yet (sent_at null, shown `queued`): its worker may still wait for a slot, and a cancel may
 * take it until `send`. A task's first claim also gives it its result token. $1 distinct
 * task ids, $2 a fresh token for each.
 */
const CLAIM_GROUP_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::text[]) AS i(id, token)
), locked AS (
  SELECT id FROM batches WHERE id IN (SELECT batch_id FROM tasks WHERE id = ANY($1::uuid[])) ORDER BY id FOR UPDATE
), claimed AS (
  UPDATE tasks t SET status = 'running', attempts = t.attempts + 1, progress = 0, sent_at = NULL,
         started_at = COALESCE(t.started_at, now()), updated_at = now(),
         result_token = COALESCE(t.result_token, i.token)
    FROM input i
   WHERE t.id = i.id AND t.status IN ('pending', 'queued', 'running')
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.batch_id, t.account_id, t.seq, t.prompt, t.seed, t.ref_upload_ids, t.attempts, t.result_token
), touched AS (
  UPDATE batches SET status = CASE WHEN status = 'pending' THEN 'running' ELSE status END, version = version + 1
   WHERE id IN (SELECT batch_id FROM claimed)
)
SELECT c.*,
       b.id AS batch_found, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.output_format, b.provider,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background
  FROM claimed c
  LEFT JOIN batches b ON b.id = c.batch_id
  LEFT JOIN models m ON m.key = b.model`;

/**
 * A group of "sends": each task's fenced move into its provider's hands, right before the
 * call (sent_at, progress 1), with its batch's version bump. A task cancelled (or taken
 * over) meanwhile is not sent. $1 task ids, $2 attempts, $3 the tasks' batch ids.
 */
const SEND_GROUP_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::int[]) AS i(id, attempt)
), locked AS (
  SELECT id FROM batches WHERE id = ANY($3::uuid[]) ORDER BY id FOR UPDATE
), sent AS (
  UPDATE tasks t SET sent_at = now(), progress = GREATEST(t.progress, 1), updated_at = now()
    FROM input i
   WHERE t.id = i.id AND t.status = 'running' AND t.attempts = i.attempt AND t.sent_at IS NULL
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.id, t.attempts, t.batch_id
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM sent)
)
SELECT id, attempts, batch_id FROM sent`;

/**
 * A group of progress writes, fenced, never backwards, with their batches' version bumps
 * (batches locked first, in id order). $1 task ids, $2 attempts, $3 percentages, $4 batch ids.
 */
const PROGRESS_GROUP_SQL = `
WITH locked AS (
  SELECT id FROM batches WHERE id = ANY($4::uuid[]) ORDER BY id FOR UPDATE
), moved AS (
  UPDATE tasks t SET progress = i.pct, updated_at = now()
    FROM unnest($1::uuid[], $2::int[], $3::int[]) AS i(id, attempt, pct)
   WHERE t.id = i.id AND t.status = 'running' AND t.attempts = i.attempt AND t.progress < i.pct
     AND t.batch_id IN (SELECT id FROM locked)
   RETURNING t.batch_id
), bumped AS (
  UPDATE batches SET version = version + 1 WHERE id IN (SELECT batch_id FROM moved)
)
SELECT DISTINCT batch_id FROM moved`;

/** The grouped writes run all the time: each is prepared once per connection (queryPrepared). */
const CLAIM_GROUP: PreparedStatement = { name: 'kiln_claim_group', text: CLAIM_GROUP_SQL };
const SEND_GROUP: PreparedStatement = { name: 'kiln_send_group', text: SEND_GROUP_SQL };
const PROGRESS_GROUP: PreparedStatement = { name: 'kiln_progress_group', text: PROGRESS_GROUP_SQL };
const SUCCEED_GROUP: PreparedStatement = { name: 'kiln_succeed_group', text: SUCCEED_GROUP_SQL };

/** Most items one grouped statement carries; a larger group is split. */
const MAX_GROUP = 250;
/** Attempts at a statement that PostgreSQL picks as a deadlock's victim. */
const DEADLOCK_ATTEMPTS = 3;

/**
 * Task state after creation: claims, sends, progress, outcomes, and the batch tallies that go
 * with them. With TaskDispatchService (pending <-> queued), the row inserts (task-rows.ts)
 * and the cancel (task-cancellation.ts), the only code that writes the tasks table. Every
 * write after the claim is fenced. Claims, sends, progress and successes are group-committed
 * (groupWrites): the many runs of a generator share statements, which is most of what a task
 * costs PostgreSQL and this process.
 *
 * Lock order: every write here locks the task's batch row before the task row (grouped
 * statements lock their batches in id order), as the cancel does, so a cancel racing any of
 * them waits instead of deadlocking. Every write bumps the batch's version and, once
 * committed, announces the batch (BatchChangePublisher) for held long polls.
 */
@Injectable()
export class TaskStateStore {
  private readonly logger = new Logger(TaskStateStore.name);
  private readonly claimOne = groupWrites((ids: readonly string[]) => this.claimGroup(ids), MAX_GROUP);
  private readonly sendOne = groupWrites((group: readonly Fence[]) => this.sendGroup(group), MAX_GROUP);
  private readonly progressOne = groupWrites((group: readonly Progress[]) => this.progressGroup(group), MAX_GROUP);
  private readonly succeedOne = groupWrites((group: readonly Success[]) => this.succeedGroup(group), MAX_GROUP);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly billing: BillingService,
    private readonly changes: BatchChangePublisher,
    @Optional() @Inject(TASK_OUTCOME_HOOK) private readonly outcomes: TaskOutcomeHook | null = null,
  ) {}

  /**
   * Takes the task for one attempt, or returns null when it is terminal (or gone): a
   * redelivered job for a finished task does nothing. A task found `running` belongs to a
   * worker that died or lost its job (Bull stalled recovery); bumping `attempts` takes it
   * over and fences the previous holder out. The batch leaves `pending` in the same
   * statement, which also reads the batch for the render.
   */
  claim(taskId: string): Promise<ClaimedTask | null> {
    return this.claimOne(taskId);
  }

  /**
   * Hands the task to its provider: called when the run holds its model or render slot,
   * right before the call. False when the fence no longer holds (the task was cancelled or
   * taken over while the run waited): the run must not send it.
   */
  send(fence: Fence): Promise<boolean> {
    return this.sendOne(fence);
  }

  /** Fire-and-forget friendly: never throws, and never moves progress backwards. */
  async reportProgress(fence: Fence, pct: number): Promise<void> {
    try {
      await this.progressOne({ fence, pct });
    } catch (err) {
      this.logger.debug(`progress write for ${fence.taskId} failed: ${(err as Error).message}`);
    }
  }

  /**
   * Terminal success: the task and its batch's tally. Returns null when the fence no longer
   * holds (another worker took the task over), in which case nothing changed.
   */
  succeed(success: Success): Promise<TallyResult | null> {
    return this.succeedOne(success);
  }

  private async claimGroup(ids: readonly string[]): Promise<(ClaimedTask | null)[]> {
    const distinct = [...new Set(ids)];
    const rows = await this.retryingDeadlocks(() =>
      queryPrepared<Record<string, any>>(this.db, CLAIM_GROUP, [distinct, distinct.map(() => newObjectToken())]),
    );
    this.changes.announce(rows.map((row: Record<string, any>) => row.batch_id as string));
    const byId = new Map<string, ClaimedTask>(rows.map((row: Record<string, any>) => [row.id, claimedTaskOf(row)]));
    // A job delivered twice at once is run once: the first delivery gets the claim, the
    // others nothing to do, as if they had come after it.
    return ids.map((id) => {
      const claim = byId.get(id) ?? null;
      byId.delete(id);
      return claim;
    });
  }

  private async sendGroup(group: readonly Fence[]): Promise<boolean[]> {
    const rows = await this.retryingDeadlocks(() =>
      queryPrepared<{ id: string; attempts: number; batch_id: string }>(this.db, SEND_GROUP, [
        group.map((f) => f.taskId),
        group.map((f) => f.attempt),
        [...new Set(group.map((f) => f.batchId))],
      ]),
    );
    this.changes.announce(rows.map((row) => row.batch_id));
    const sent = new Set(rows.map((row) => `${row.id}:${row.attempts}`));
    // A fence sent twice in one group (a duplicate delivery) is sent once.
    return group.map((f) => sent.delete(`${f.taskId}:${f.attempt}`));
  }

  private async progressGroup(group: readonly Progress[]): Promise<void[]> {
    const rows = await this.retryingDeadlocks(() =>
      queryPrepared<{ batch_id: string }>(this.db, PROGRESS_GROUP, [
        group.map((p) => p.fence.taskId),
        group.map((p) => p.fence.attempt),
        group.map((p) => p.pct),
        [...new Set(group.map((p) => p.fence.batchId))],
      ]),
    );
    this.changes.announce(rows.map((row) => row.batch_id));
    return group.map(() => undefined);
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
    ];
    const hook = this.outcomes;
    // With someone listening, the outcomes go into the outbox in the same transaction; the
    // group stays one transaction whatever its size, so 1,000 successes cost a handful of
    // outbox statements, not 1,000.
    const listening = hook !== null && (await hook.listening(this.db, batchIds));
    const rows = await this.retryingDeadlocks(() =>
      listening
        ? this.db.transaction(async (m) => {
            const written = await queryPrepared<Row>(m, SUCCEED_GROUP, params);
            const finished = [...new Set(written.filter((r) => r.finished_at !== null).map((r) => r.batch_id))];
            await hook.record(m, { ended: written.map(endedTaskOf), finishedBatchIds: finished });
            return written;
          })
        : queryPrepared<Row>(this.db, SUCCEED_GROUP, params),
    );
    this.changes.announce(rows.map((row) => row.batch_id));
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

  /**
   * Grouped statements lock rows of many tasks; a duplicate delivery on another replica can
   * lock the same rows in another order. PostgreSQL then rolls one statement back, which is
   * safe to run again.
   */
  private async retryingDeadlocks<T>(statement: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await statement();
      } catch (err) {
        if (attempt >= DEADLOCK_ATTEMPTS || !isDeadlock(err)) throw err;
      }
    }
  }

  /**
   * Terminal failure: the task, its refund and its batch's tally in one transaction, so a
   * crash anywhere leaves either all of it or none. The batch is locked first (see the lock
   * order above). The fenced update admits one writer, so a cancelled task is never also
   * refunded as failed; the ledger's unique index on task refunds is the backstop, and a
   * refund it refuses means "already refunded", not an error. Returns null when the fence no
   * longer holds.
   */
  async fail(fence: Fence, message: string, code: TaskErrorCode): Promise<(TallyResult & { refunded: number }) | null> {
    const result = await this.db.transaction(async (m) => {
      const [batch] = await m.query(`SELECT unit_cost FROM batches WHERE id = $1 FOR UPDATE`, [fence.batchId]);
      // No batch row means no task row either (they go together).
      if (!batch) return null;
      const rows = await queryRows<EndedRow>(
        m,
        `UPDATE tasks t SET status = 'failed', error = $3, error_code = $4, finished_at = now(), updated_at = now()
          WHERE id = $1 AND status = 'running' AND attempts = $2
          RETURNING t.id, t.batch_id, ${ENDED_TASK_COLUMNS}`,
        [fence.taskId, fence.attempt, message, code],
      );
      if (rows.length === 0) return null;
      const accountId = rows[0].ended_account_id;
      const refunded = await this.refundOnce(m, { accountId, batchId: fence.batchId, taskId: fence.taskId, amount: batch.unit_cost });
      const tally = await this.tally(m, fence.batchId, { succeeded: 0, failed: 1, refunded, previewUrl: null });
      await this.recordOutcomes(m, [fence.batchId], { ended: rows.map(endedTaskOf), finishedBatchIds: tally.finished ? [fence.batchId] : [] });
      return { ...tally, refunded };
    });
    if (result) this.changes.announce([fence.batchId]);
    return result;
  }

  /**
   * `running -> queued` for a retry (or a give-back at shutdown). If the batch was cancelled
   * meanwhile, the task is not queued again but cancelled and refunded in the same
   * transaction: between its attempts it is not in its provider's hands. The batch is locked
   * first, so a cancel either sees the task queued (and takes it) or comes after this.
   */
  async requeue(fence: Fence): Promise<RequeueOutcome> {
    const outcome = await this.db.transaction(async (m): Promise<RequeueOutcome> => {
      const [batch] = await m.query(`SELECT cancelled_at FROM batches WHERE id = $1 FOR UPDATE`, [fence.batchId]);
      if (batch?.cancelled_at) {
        const cancelled = await cancelUnsentTasks(m, this.billing, fence.batchId, { taskId: fence.taskId, attempt: fence.attempt });
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
    if (outcome) this.changes.announce([fence.batchId]);
    return outcome;
  }

  /**
   * Recounts a batch whose tasks are all terminal but which was never marked finished (a
   * tally lost to a bug or a manual repair): counts from the tasks, refunds from billing.
   * Returns the status it settled on, or null when the batch is not finishable (yet).
   */
  async finishFromTasks(batchId: string): Promise<BatchStatus | null> {
    const status = await this.db.transaction(async (m) => {
      const [batch] = await m.query(`SELECT status FROM batches WHERE id = $1 AND finished_at IS NULL FOR UPDATE`, [batchId]);
      if (!batch) return null;
      const [c] = await m.query(
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
      await this.recordOutcomes(m, [batchId], { ended: [], finishedBatchIds: [batchId] });
      return status;
    });
    if (status) this.changes.announce([batchId]);
    return status;
  }

  /**
   * Outcomes of a write made in `m` (a failure, a recount, and any later writer such as a
   * cancel that finishes batches): into the outbox, in the same transaction, when anyone
   * listens.
   */
  async recordOutcomes(m: EntityManager, batchIds: readonly string[], outcomes: Parameters<TaskOutcomeHook['record']>[1]): Promise<void> {
    if (!this.outcomes || (outcomes.ended.length === 0 && outcomes.finishedBatchIds.length === 0)) return;
    if (!(await this.outcomes.listening(m, batchIds))) return;
    await this.outcomes.record(m, outcomes);
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
      this.logger.warn(`Task ${refund.taskId} was already refunded; not refunding it again`);
      return 0;
    }
  }

  private async tally(
    m: EntityManager,
    batchId: string,
    delta: { succeeded: number; failed: number; refunded: number; previewUrl: string | null },
  ): Promise<TallyResult> {
    const [row] = await queryRows<{ status: BatchStatus; finished_at: Date | null; preview_url: string | null }>(m, TALLY_SQL, [
      batchId,
      delta.succeeded,
      delta.failed,
      delta.refunded,
      delta.previewUrl,
    ]);
    return { status: row.status, finished: row.finished_at !== null, previewUrl: row.preview_url };
  }
}

/** A row of a statement that ended tasks: their id and batch, and ENDED_TASK_COLUMNS. */
interface EndedRow {
  id: string;
  batch_id: string;
  ended_account_id: string;
  ended_seq: number;
  ended_prompt: string;
  ended_status: TaskView['status'];
  ended_progress: number;
  ended_result_url: string | null;
  ended_error: string | null;
  ended_error_code: TaskView['errorCode'];
  ended_result_width: number | null;
  ended_result_height: number | null;
}

function endedTaskOf(row: EndedRow): EndedTask {
  return {
    accountId: row.ended_account_id,
    task: {
      id: row.id,
      batchId: row.batch_id,
      seq: row.ended_seq,
      prompt: row.ended_prompt,
      status: row.ended_status,
      progress: row.ended_progress,
      resultUrl: row.ended_result_url,
      error: row.ended_error,
      errorCode: row.ended_error_code,
      resultWidth: row.ended_result_width,
      resultHeight: row.ended_result_height,
    },
  };
}

/** PostgreSQL picked the statement as a deadlock's victim (and rolled it back). */
function isDeadlock(err: unknown): boolean {
  return pgError(err).code === '40P01';
}

/** PostgreSQL unique_violation on the ledger's once-per-task refund index. */
function isRefundAlreadyMade(err: unknown): boolean {
  const { code, constraint } = pgError(err);
  return code === '23505' && (constraint === undefined || constraint === 'ledger_task_refund_once');
}

/** node-postgres returns uuid[] as an array, or as its text form on older type parsers. */
function parseUuidArray(value: unknown): string[] {
  if (Array.isArray(value)) return value.map(String);
  if (typeof value === 'string') {
    const inner = value.replace(/^\{|\}$/g, '').trim();
    return inner.length === 0 ? [] : inner.split(',').map((s) => s.trim());
  }
  return [];
}

/** A CLAIM_GROUP_SQL row as a claim. */
function claimedTaskOf(row: Record<string, any>): ClaimedTask {
  return {
    id: row.id,
    batchId: row.batch_id,
    accountId: row.account_id,
    seq: row.seq,
    prompt: row.prompt,
    seed: row.seed,
    refUploadIds: parseUuidArray(row.ref_upload_ids),
    attempts: row.attempts,
    resultToken: row.result_token,
    batch: row.batch_found ? renderBatchOf(row) : null,
  };
}

/** The batch columns of a CLAIM_GROUP_SQL row. */
function renderBatchOf(row: Record<string, any>): RenderBatch {
  return {
    id: row.batch_id,
    model: row.model,
    aspectRatio: row.aspect_ratio,
    resolution: row.resolution,
    quality: row.quality,
    background: row.background,
    outputFormat: row.output_format,
    provider: row.provider,
    width: row.width,
    height: row.height,
    previewUrl: row.preview_url,
    supportsQuality: row.supports_quality,
    supportsBackground: row.supports_background,
  };
}
