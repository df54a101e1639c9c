import { Inject, Injectable, Logger, Optional } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BillingService, RefundTask } from '@app/billing';
import { BatchStatus, pgError, ProviderRoute, queryRows, TaskErrorCode } from '@app/database';
import { newObjectToken } from '@app/storage';
import { batchStatusFromCounts, batchStatusFromCountsSql } from './batch-status';
import { groupWrites } from './group-writes';
import { EndedTask, TASK_OUTCOME_HOOK, TaskOutcomeHook } from './task-outcome.hook';
import type { TaskView } from './task-rows';

/** A claimed attempt: every later write is conditioned on (status = 'running', attempts = attempt). */
export interface Fence {
  taskId: string;
  attempt: number;
}

/** What a task's render needs of its batch: the batch's snapshot, read in the claim. */
export interface RenderBatch {
  id: string;
  model: string;
  aspectRatio: string;
  resolution: string;
  quality: string;
  background: string | null;
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

/**
 * The SET list that counts terminal tasks into a batch and, when they were its last, settles
 * its status and finished_at. Each argument is SQL: how many succeeded, failed, credits
 * refunded, and a preview URL (or NULL). Runs in the same statement or transaction as the
 * tasks' fenced updates, so each task is counted exactly once.
 */
const tallyAssignments = (succeeded: string, failed: string, refunded: string, preview: string): string => {
  const succeededNow = `succeeded_count + ${succeeded}`;
  const failedNow = `failed_count + ${failed}`;
  // The statement cannot tell waiting tasks from running ones, and need not: it runs after a
  // task ended, so with every unfinished task counted as waiting the rule still says
  // `running` until the last one ends.
  const status = batchStatusFromCountsSql({
    stored: 'status',
    pending: `GREATEST(total - (${succeededNow}) - (${failedNow}), 0)`,
    running: '0',
    succeeded: succeededNow,
    failed: failedNow,
  });
  return `
  succeeded_count = ${succeededNow},
  failed_count = ${failedNow},
  credits_refunded = credits_refunded + ${refunded},
  preview_url = COALESCE(preview_url, ${preview}),
  status = ${status},
  finished_at = CASE
    WHEN finished_at IS NULL AND ${succeededNow} + ${failedNow} >= total THEN now()
    ELSE finished_at END`;
};

/** One task's tally: $1 batch, $2 succeeded, $3 failed, $4 refunded, $5 preview URL or null. */
const TALLY_SQL = `
UPDATE batches SET ${tallyAssignments('$2', '$3', '$4', '$5::text')}
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
  UPDATE batches SET ${tallyAssignments('counted.n', '0', '0', 'counted.new_preview')}
    FROM counted
   WHERE batches.id = counted.batch_id
  RETURNING batches.id, batches.status, batches.finished_at, batches.preview_url
)
SELECT done.*, tallied.status AS batch_status, tallied.finished_at, tallied.preview_url AS batch_preview_url
  FROM done JOIN tallied ON tallied.id = done.batch_id`;

/**
 * Takes a group of tasks for one attempt each and reads what their renders need, in one
 * statement: the fenced claims, their batches' move out of `pending` (locked in id order, so
 * two generators claiming tasks of the same new batches cannot deadlock), and the batch and
 * model rows, read from the statement's snapshot, which is all a render needs of them. A
 * task's first claim also gives it its result token. $1 distinct task ids, $2 a fresh token
 * for each.
 */
const CLAIM_GROUP_SQL = `
WITH input AS (
  SELECT * FROM unnest($1::uuid[], $2::text[]) AS i(id, token)
), claimed AS (
  UPDATE tasks t SET status = 'running', attempts = t.attempts + 1, progress = 1,
         started_at = COALESCE(t.started_at, now()), updated_at = now(),
         result_token = COALESCE(t.result_token, i.token)
    FROM input i
   WHERE t.id = i.id AND t.status IN ('pending', 'queued', 'running')
   RETURNING t.id, t.batch_id, t.account_id, t.seq, t.prompt, t.seed, t.ref_upload_ids, t.attempts, t.result_token
), starting AS (
  SELECT id FROM batches WHERE id IN (SELECT batch_id FROM claimed) AND status = 'pending' ORDER BY id FOR UPDATE
), started AS (
  UPDATE batches SET status = 'running' WHERE id IN (SELECT id FROM starting) AND status = 'pending'
)
SELECT c.*,
       b.id AS batch_found, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.provider,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background
  FROM claimed c
  LEFT JOIN batches b ON b.id = c.batch_id
  LEFT JOIN models m ON m.key = b.model`;

/** A group of progress writes, fenced, never backwards. $1 task ids, $2 attempts, $3 percentages. */
const PROGRESS_GROUP_SQL = `
UPDATE tasks t SET progress = i.pct, updated_at = now()
  FROM unnest($1::uuid[], $2::int[], $3::int[]) AS i(id, attempt, pct)
 WHERE t.id = i.id AND t.status = 'running' AND t.attempts = i.attempt AND t.progress < i.pct`;

/** Most items one grouped statement carries; a larger group is split. */
const MAX_GROUP = 250;
/** Attempts at a statement that PostgreSQL picks as a deadlock's victim. */
const DEADLOCK_ATTEMPTS = 3;

/**
 * Task state after creation: claims, progress, outcomes, and the batch tallies that go with
 * them. With TaskDispatchService (pending <-> queued) and the row inserts (task-rows.ts), the
 * only code that writes the tasks table. Every write after the claim is fenced. Claims,
 * progress and successes are group-committed (groupWrites): the many runs of a generator
 * share statements, which is most of what a task costs PostgreSQL and this process.
 */
@Injectable()
export class TaskStateStore {
  private readonly logger = new Logger(TaskStateStore.name);
  private readonly claimOne = groupWrites((ids: readonly string[]) => this.claimGroup(ids), MAX_GROUP);
  private readonly progressOne = groupWrites((group: readonly Progress[]) => this.progressGroup(group), MAX_GROUP);
  private readonly succeedOne = groupWrites((group: readonly Success[]) => this.succeedGroup(group), MAX_GROUP);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly billing: BillingService,
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
      this.db.query(CLAIM_GROUP_SQL, [distinct, distinct.map(() => newObjectToken())]),
    );
    const byId = new Map<string, ClaimedTask>(rows.map((row: Record<string, any>) => [row.id, claimedTaskOf(row)]));
    // A job delivered twice at once is run once: the first delivery gets the claim, the
    // others nothing to do, as if they had come after it.
    return ids.map((id) => {
      const claim = byId.get(id) ?? null;
      byId.delete(id);
      return claim;
    });
  }

  private async progressGroup(group: readonly Progress[]): Promise<void[]> {
    await this.retryingDeadlocks(() =>
      this.db.query(PROGRESS_GROUP_SQL, [group.map((p) => p.fence.taskId), group.map((p) => p.fence.attempt), group.map((p) => p.pct)]),
    );
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
            const written = await queryRows<Row>(m, SUCCEED_GROUP_SQL, params);
            const finished = [...new Set(written.filter((r) => r.finished_at !== null).map((r) => r.batch_id))];
            await hook.record(m, { ended: written.map(endedTaskOf), finishedBatchIds: finished });
            return written;
          })
        : queryRows<Row>(this.db, SUCCEED_GROUP_SQL, params),
    );
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
   * crash anywhere leaves either all of it or none. The fenced update admits one writer; the
   * ledger's unique index on task refunds is the backstop, and a refund it refuses means
   * "already refunded", not an error. Returns null when the fence no longer holds.
   */
  async fail(fence: Fence, message: string, code: TaskErrorCode): Promise<(TallyResult & { refunded: number }) | null> {
    return this.db.transaction(async (m) => {
      const rows = await queryRows<EndedRow>(
        m,
        `UPDATE tasks t SET status = 'failed', error = $3, error_code = $4, finished_at = now(), updated_at = now()
          WHERE id = $1 AND status = 'running' AND attempts = $2
          RETURNING t.id, t.batch_id, ${ENDED_TASK_COLUMNS}`,
        [fence.taskId, fence.attempt, message, code],
      );
      if (rows.length === 0) return null;
      const { batch_id: batchId, ended_account_id: accountId } = rows[0];
      const [batch] = await m.query(`SELECT unit_cost FROM batches WHERE id = $1`, [batchId]);
      const refunded = await this.refundOnce(m, { accountId, batchId, taskId: fence.taskId, amount: batch.unit_cost });
      const tally = await this.tally(m, batchId, { succeeded: 0, failed: 1, refunded, previewUrl: null });
      await this.recordOutcomes(m, [batchId], { ended: rows.map(endedTaskOf), finishedBatchIds: tally.finished ? [batchId] : [] });
      return { ...tally, refunded };
    });
  }

  /** `running -> queued` for a retry; false when the fence no longer holds. */
  async requeue(fence: Fence): Promise<boolean> {
    const rows = await queryRows(
      this.db,
      `UPDATE tasks SET status = 'queued', progress = 0, updated_at = now()
        WHERE id = $1 AND status = 'running' AND attempts = $2
        RETURNING id`,
      [fence.taskId, fence.attempt],
    );
    return rows.length > 0;
  }

  /**
   * Recounts a batch whose tasks are all terminal but which was never marked finished (a
   * tally lost to a bug or a manual repair): counts from the tasks, refunds from billing.
   * Returns the status it settled on, or null when the batch is not finishable (yet).
   */
  async finishFromTasks(batchId: string): Promise<BatchStatus | null> {
    return this.db.transaction(async (m) => {
      const [batch] = await m.query(`SELECT status FROM batches WHERE id = $1 AND finished_at IS NULL FOR UPDATE`, [batchId]);
      if (!batch) return null;
      const [c] = await m.query(
        `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
                count(*) FILTER (WHERE status = 'failed')::int AS failed,
                count(*) FILTER (WHERE status IN ('pending', 'queued', 'running'))::int AS unfinished
           FROM tasks WHERE batch_id = $1`,
        [batchId],
      );
      if (c.unfinished > 0 || c.succeeded + c.failed === 0) return null;
      const status = batchStatusFromCounts(batch.status, { pending: 0, running: 0, succeeded: c.succeeded, failed: c.failed });
      const refunded = await this.billing.refundedForBatch(m, batchId);
      await m.query(
        `UPDATE batches SET succeeded_count = $2, failed_count = $3, credits_refunded = $4, status = $5, finished_at = now()
          WHERE id = $1`,
        [batchId, c.succeeded, c.failed, refunded, status],
      );
      await this.recordOutcomes(m, [batchId], { ended: [], finishedBatchIds: [batchId] });
      return status;
    });
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
    provider: row.provider,
    width: row.width,
    height: row.height,
    previewUrl: row.preview_url,
    supportsQuality: row.supports_quality,
    supportsBackground: row.supports_background,
  };
}
