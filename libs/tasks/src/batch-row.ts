import { DataSource, EntityManager } from 'typeorm';
import { BatchTier, OutputFormat, ProviderRoute, queryRows, RefMode, Resolution } from '@app/database';
import type { FailoverSettings } from '@app/providers';
import type { NewTask } from './task-rows';

/*
 * The batches table has one writer, this lib (libs/testing/src/architecture.ts checks it): the
 * row is inserted here, its counts, status, version, finished_at and cancel are written by the
 * task transitions in the same statements as the tasks they count (batch-tally.ts,
 * fenced-write.ts, task-cancellation.ts), and the retention sweep clears previews through
 * the functions below. Clients see it as the Batch object (batch-view.ts, batch-object.ts, here
 * beside the task object so that the webhooks lib reports a batch without libs/batches).
 */

/** A new batch row: everything its creation decides (the rest are column defaults). */
export interface NewBatch {
  id: string;
  accountId: string;
  apiKeyId: string | null;
  prompts: string[];
  model: string;
  aspectRatio: string;
  resolution: Resolution;
  quality: string;
  background: string | null;
  countPerCombo: number;
  refMode: RefMode;
  refImages: string[];
  total: number;
  note: string | null;
  seed: number | null;
  outputFormat: OutputFormat;
  unitCost: number;
  creditsCharged: number;
  /** The model's routing when the batch was made: its tasks render through this snapshot. */
  provider: ProviderRoute;
  /** The model's chain of routes (routes[0] is `provider`) and its failover settings; null: `provider` alone, the defaults. */
  routes: ProviderRoute[] | null;
  failover: FailoverSettings | null;
  width: number;
  height: number;
  createdViaApi: boolean;
  /** standard, or economy: its tasks wait for the generator's collector (an upstream batch), not the feeder. */
  tier: BatchTier;
  /** Economy: the model's window; expires_at = created_at + this many hours. Null for standard. */
  windowHours: number | null;
  /** Tasks not sent by then are cancelled and refunded (BatchDeadlines); null: none. */
  deadline: Date | null;
}

/**
 * Inserts the batch `pending` and all its tasks, in the caller's transaction and in one
 * statement (one round trip of the creation's transaction, which holds the account's lock).
 *
 * The batch: clock_timestamp(), not now(): it is read after the account lock was taken, so
 * one account's batches get created_at in commit order and a newest-first listing never shows
 * a batch "older" than one committed before it. An economy batch's expires_at is that same
 * instant, rounded to milliseconds as the created_at column stores it, plus its window:
 * expiresAt - createdAt is exactly the window.
 *
 * The tasks, whatever the batch size: parallel arrays unnested into rows. Prompts travel once,
 * in the batch's jsonb, and tasks point into them; each task's reference ids travel as a
 * uuid[] literal because unnest would flatten a two-dimensional array. The first
 * `dispatchCount` tasks (by seq) are written `queued`: the caller enqueues them right after the
 * commit (TaskDispatchService.enqueueQueued); the rest wait as `pending` for the generators'
 * feeder. Each task carries the batch's tier: an economy batch's tasks are all written
 * `pending` (none queued, whatever `dispatchCount` says), with no upstream batch, and wait
 * there for the generator's collector; the feeder takes standard tasks only. The tasks' foreign
 * key is checked at the end of the statement, when the batch row is there.
 *
 * Returns created_at and expires_at.
 */
export async function insertBatchWithTasks(
  m: EntityManager,
  b: NewBatch,
  tasks: readonly NewTask[],
  dispatchCount: number,
): Promise<{ createdAt: Date; expiresAt: Date | null }> {
  const [row] = await queryRows<{ created_at: Date; expires_at: Date | null }>(
    m,
    `WITH batch AS (
       INSERT INTO batches (id, account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background,
         count_per_combo, ref_mode, ref_images, total, note, unit_cost, credits_charged, credits_refunded, provider,
         width, height, status, created_via_api, seed, output_format, tier, created_at, expires_at, deadline, routes, failover)
       SELECT $1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 0, $17, $18, $19, 'pending', $20,
         $21, $22, $23, at.t, at.t + make_interval(hours => $24::int), $31, $32::jsonb, $33::jsonb
         FROM (SELECT clock_timestamp()::timestamptz(3) AS t) at
       RETURNING created_at, expires_at
     ), task AS (
       INSERT INTO tasks (id, batch_id, account_id, seq, prompt, ref_upload_ids, seed, status, tier)
       SELECT t.id, $1, $2, t.seq, $4::jsonb ->> t.prompt_index, t.refs::uuid[], t.seed,
              CASE WHEN t.seq < $30 THEN 'queued' ELSE 'pending' END, $23
         FROM unnest($25::uuid[], $26::int[], $27::int[], $28::text[], $29::int[]) AS t(id, seq, prompt_index, refs, seed)
     )
     SELECT created_at, expires_at FROM batch`,
    [
      b.id,
      b.accountId,
      b.apiKeyId,
      JSON.stringify(b.prompts),
      b.model,
      b.aspectRatio,
      b.resolution,
      b.quality,
      b.background,
      b.countPerCombo,
      b.refMode,
      JSON.stringify(b.refImages),
      b.total,
      b.note,
      b.unitCost,
      b.creditsCharged,
      JSON.stringify(b.provider),
      b.width,
      b.height,
      b.createdViaApi,
      b.seed,
      b.outputFormat,
      b.tier,
      b.tier === 'economy' ? b.windowHours : null,
      tasks.map((t) => t.id),
      tasks.map((t) => t.seq),
      tasks.map((t) => t.promptIndex),
      tasks.map((t) => `{${t.refUploadIds.join(',')}}`),
      tasks.map((t) => t.seed),
      b.tier === 'economy' ? 0 : dispatchCount,
      b.deadline,
      b.routes && b.routes.length > 1 ? JSON.stringify(b.routes) : null,
      b.failover ? JSON.stringify(b.failover) : null,
    ],
  );
  return { createdAt: row.created_at, expiresAt: row.expires_at };
}

/** Previews of batches done before `cutoff`, oldest first: the retention sweep's next chunk. */
export async function selectExpiredPreviews(db: DataSource, cutoff: Date, limit: number): Promise<{ id: string; url: string }[]> {
  return queryRows<{ id: string; url: string }>(
    db,
    `SELECT id, preview_url AS url FROM batches
      WHERE preview_url IS NOT NULL AND finished_at < $1 ORDER BY finished_at LIMIT $2`,
    [cutoff, limit],
  );
}

/** Forgets the previews of these batches (their objects are gone); a changed row gets a new version. */
export async function clearPreviewUrls(db: DataSource, batchIds: readonly string[]): Promise<void> {
  await db.query(`UPDATE batches SET preview_url = NULL, version = version + 1 WHERE id = ANY($1::uuid[])`, [batchIds]);
}
