import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource, EntityManager } from 'typeorm';
import { BillingService, utcDay } from '@app/billing';
import { BatchStatus, ProviderRoute, queryRows } from '@app/database';

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
  /** This claim moved the batch from pending to running. */
  startedBatch: boolean;
  /** Null only if the batch row is gone (a manual repair): the run then fails as internal. */
  batch: RenderBatch | null;
}

/** A reference image row, in the task's order; null where the upload no longer exists. */
export type ReferenceRow = { id: string; storageKey: string; contentType: string } | null;

export interface TallyResult {
  status: BatchStatus;
  finished: boolean;
  previewUrl: string | null;
}

/**
 * Counts one terminal task into its batch and, when it was the last, settles the batch's
 * status and finished_at. Runs in the same statement or transaction as the task's fenced
 * update, so each task is counted exactly once. `batchId` is SQL for the batch's id; $2
 * succeeded, $3 failed, $4 refunded, $5 preview URL or null.
 */
const tallySql = (batchId: string): string => `
UPDATE batches SET
  succeeded_count = succeeded_count + $2,
  failed_count = failed_count + $3,
  credits_refunded = credits_refunded + $4,
  preview_url = COALESCE(preview_url, $5::text),
  status = CASE
    WHEN status = 'cancelled' THEN status
    WHEN succeeded_count + $2 + failed_count + $3 >= total THEN
      CASE WHEN failed_count + $3 = 0 THEN 'succeeded' WHEN succeeded_count + $2 = 0 THEN 'failed' ELSE 'partial' END
    ELSE 'running' END,
  finished_at = CASE
    WHEN finished_at IS NULL AND succeeded_count + $2 + failed_count + $3 >= total THEN now()
    ELSE finished_at END
WHERE id = ${batchId}
RETURNING status, finished_at, preview_url`;

const TALLY_SQL = tallySql('$1');

/**
 * Terminal success in one statement, so one round trip and no transaction: the fenced task
 * update, then its batch's tally, which sees no row (and changes nothing) when the fence no
 * longer holds. $1 task, $2..$5 as in the tally (1, 0, 0, preview URL), $6 attempt, $7 result
 * URL, $8 result key.
 */
const SUCCEED_SQL = `
WITH done AS (
  UPDATE tasks SET status = 'succeeded', progress = 100, result_url = $7, result_key = $8, error = NULL,
         finished_at = now(), updated_at = now()
   WHERE id = $1 AND status = 'running' AND attempts = $6
   RETURNING batch_id
)
${tallySql('(SELECT batch_id FROM done)')}`;

/**
 * Takes a task for one attempt and reads what its render needs, in one statement: the
 * fenced claim, the batch's move out of `pending`, and the batch and model rows. The batch
 * columns come from the statement's snapshot, which is all a render needs of them.
 */
const CLAIM_SQL = `
WITH claimed AS (
  UPDATE tasks SET status = 'running', attempts = attempts + 1, progress = 1,
         started_at = COALESCE(started_at, now()), updated_at = now()
   WHERE id = $1 AND status IN ('pending', 'queued', 'running')
   RETURNING id, batch_id, account_id, seq, prompt, seed, ref_upload_ids, attempts
), started AS (
  UPDATE batches SET status = 'running'
   WHERE id = (SELECT batch_id FROM claimed) AND status = 'pending'
   RETURNING id
)
SELECT c.*, EXISTS (SELECT 1 FROM started) AS started_batch,
       b.id AS batch_found, b.model, b.aspect_ratio, b.resolution, b.quality, b.background, b.provider,
       b.width, b.height, b.preview_url,
       COALESCE(m.supports_quality, false) AS supports_quality,
       COALESCE(m.supports_background, false) AS supports_background
  FROM claimed c
  LEFT JOIN batches b ON b.id = c.batch_id
  LEFT JOIN models m ON m.key = b.model`;

/** The only code that writes task state. Every write after the claim is fenced. */
@Injectable()
export class TaskStateStore {
  private readonly logger = new Logger(TaskStateStore.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly billing: BillingService,
  ) {}

  /**
   * Takes the task for one attempt, or returns null when it is terminal (or gone): a
   * redelivered job for a finished task does nothing. A task found `running` belongs to a
   * worker that died or lost its job (Bull stalled recovery); bumping `attempts` takes it
   * over and fences the previous holder out. The batch leaves `pending` in the same
   * statement, which also reads the batch for the render.
   */
  async claim(taskId: string): Promise<ClaimedTask | null> {
    const rows = await this.db.query(CLAIM_SQL, [taskId]);
    const row = rows[0];
    if (!row) return null;
    return {
      id: row.id,
      batchId: row.batch_id,
      accountId: row.account_id,
      seq: row.seq,
      prompt: row.prompt,
      seed: row.seed,
      refUploadIds: parseUuidArray(row.ref_upload_ids),
      attempts: row.attempts,
      startedBatch: row.started_batch === true,
      batch: row.batch_found ? renderBatchOf(row) : null,
    };
  }

  /** The task's reference images' rows, in its order; null where an upload row is gone. */
  async references(task: ClaimedTask): Promise<ReferenceRow[]> {
    if (task.refUploadIds.length === 0) return [];
    const uploads: { id: string; storage_key: string; content_type: string }[] = await this.db.query(
      `SELECT id, storage_key, content_type FROM uploads WHERE id = ANY($1::uuid[])`,
      [task.refUploadIds],
    );
    const byId = new Map(uploads.map((u) => [u.id, u]));
    return task.refUploadIds.map((id) => {
      const u = byId.get(id);
      return u ? { id: u.id, storageKey: u.storage_key, contentType: u.content_type } : null;
    });
  }

  /** Fire-and-forget friendly: never throws, and never moves progress backwards. */
  async reportProgress(fence: Fence, pct: number): Promise<void> {
    try {
      await this.db.query(
        `UPDATE tasks SET progress = $3, updated_at = now()
          WHERE id = $1 AND status = 'running' AND attempts = $2 AND progress < $3`,
        [fence.taskId, fence.attempt, pct],
      );
    } catch (err) {
      this.logger.debug(`progress write for ${fence.taskId} failed: ${(err as Error).message}`);
    }
  }

  /**
   * Terminal success: the task and its batch's tally in one statement. Returns null when
   * the fence no longer holds (another worker took the task over), in which case nothing changed.
   */
  async succeed(
    fence: Fence,
    result: { resultUrl: string; resultKey: string; previewUrl: string | null },
  ): Promise<TallyResult | null> {
    const [row] = await queryRows<{ status: BatchStatus; finished_at: Date | null; preview_url: string | null }>(
      this.db,
      SUCCEED_SQL,
      [fence.taskId, 1, 0, 0, result.previewUrl, fence.attempt, result.resultUrl, result.resultKey],
    );
    return row ? { status: row.status, finished: row.finished_at !== null, previewUrl: row.preview_url } : null;
  }

  /**
   * Terminal failure: the task, its refund and its batch's tally in one transaction, so a
   * crash anywhere leaves either all of it or none. The fenced update admits one writer; the
   * ledger's unique index on task refunds is the backstop, and a refund it refuses means
   * "already refunded", not an error. Returns null when the fence no longer holds.
   */
  async fail(fence: Fence, message: string): Promise<(TallyResult & { refunded: number }) | null> {
    return this.db.transaction(async (m) => {
      const rows = await queryRows<{ batch_id: string; account_id: string }>(
        m,
        `UPDATE tasks SET status = 'failed', error = $3, finished_at = now(), updated_at = now()
          WHERE id = $1 AND status = 'running' AND attempts = $2
          RETURNING batch_id, account_id`,
        [fence.taskId, fence.attempt, message],
      );
      if (rows.length === 0) return null;
      const { batch_id: batchId, account_id: accountId } = rows[0];
      const [batch] = await m.query(
        `SELECT b.unit_cost, b.api_key_id, b.created_at,
                (SELECT l.charge_day::text FROM ledger_entries l
                  WHERE l.batch_id = b.id AND l.kind = 'batch_charge' LIMIT 1) AS charge_day
           FROM batches b WHERE b.id = $1`,
        [batchId],
      );
      const refunded = await this.refundOnce(m, {
        accountId,
        batchId,
        taskId: fence.taskId,
        apiKeyId: batch.api_key_id,
        chargeDay: batch.charge_day ?? utcDay(new Date(batch.created_at)),
        amount: batch.unit_cost,
      });
      const tally = await this.tally(m, batchId, { succeeded: 0, failed: 1, refunded, previewUrl: null });
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
   * tally lost to a bug or a manual repair): counts from the tasks, refunds from the ledger.
   * Returns the status it settled on, or null when the batch is not finishable (yet).
   */
  async finishFromTasks(batchId: string): Promise<BatchStatus | null> {
    return this.db.transaction(async (m) => {
      const [batch] = await m.query(`SELECT status FROM batches WHERE id = $1 AND finished_at IS NULL FOR UPDATE`, [batchId]);
      if (!batch) return null;
      const [c] = await m.query(
        `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS succeeded,
                count(*) FILTER (WHERE status = 'failed')::int AS failed,
                count(*) FILTER (WHERE status IN ('pending', 'queued', 'running'))::int AS unfinished,
                (SELECT COALESCE(SUM(amount), 0)::int FROM ledger_entries WHERE batch_id = $1 AND kind = 'task_refund') AS refunded
           FROM tasks WHERE batch_id = $1`,
        [batchId],
      );
      if (c.unfinished > 0 || c.succeeded + c.failed === 0) return null;
      const status: BatchStatus =
        batch.status === 'cancelled' ? 'cancelled' : c.failed === 0 ? 'succeeded' : c.succeeded === 0 ? 'failed' : 'partial';
      await m.query(
        `UPDATE batches SET succeeded_count = $2, failed_count = $3, credits_refunded = $4, status = $5, finished_at = now()
          WHERE id = $1`,
        [batchId, c.succeeded, c.failed, c.refunded, status],
      );
      return status;
    });
  }

  private async refundOnce(m: EntityManager, refund: Parameters<BillingService['refundTask']>[1]): Promise<number> {
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

/** PostgreSQL unique_violation on the ledger's once-per-task refund index. */
function isRefundAlreadyMade(err: unknown): boolean {
  const e = err as { code?: string; constraint?: string; driverError?: { code?: string; constraint?: string } };
  const code = e?.code ?? e?.driverError?.code;
  const constraint = e?.constraint ?? e?.driverError?.constraint;
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

/** The batch columns of a CLAIM_SQL row. */
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
