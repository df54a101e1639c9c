import { DataSource, EntityManager } from 'typeorm';
import { BatchEntity, Cursor, OutputFormat, PreparedStatement, ProviderRoute, queryPrepared, RefMode, Resolution } from '@app/database';
import { BatchFields } from './batch-view';

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
  width: number;
  height: number;
  createdViaApi: boolean;
}

/**
 * Inserts the batch `pending`, in the caller's transaction. clock_timestamp(), not now(): it
 * is read after the account lock was taken, so one account's batches get created_at in
 * commit order and a newest-first listing never shows a batch "older" than one committed
 * before it. Returns created_at.
 */
export async function insertBatch(m: EntityManager, b: NewBatch): Promise<Date> {
  const [row] = await m.query(
    `INSERT INTO batches (id, account_id, api_key_id, prompts, model, aspect_ratio, resolution, quality, background,
       count_per_combo, ref_mode, ref_images, total, note, unit_cost, credits_charged, credits_refunded, provider,
       width, height, status, created_via_api, seed, output_format, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, 0, $17, $18, $19, 'pending', $20,
       $21, $22, clock_timestamp())
     RETURNING created_at`,
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
    ],
  );
  return row.created_at;
}

/** Every full poll runs it: prepared once per connection. */
const SELECT_BATCH_FIELDS: PreparedStatement = {
  name: 'kiln_select_batch_fields',
  text: `SELECT id, created_at AS "createdAt", prompts, model, aspect_ratio AS "aspectRatio", resolution, quality,
                background, count_per_combo AS "countPerCombo", ref_mode AS "refMode", ref_images AS "refImages", total,
                note, seed, output_format AS "outputFormat", preview_url AS "previewUrl", created_via_api AS "createdViaApi", status,
                credits_charged AS "creditsCharged", credits_refunded AS "creditsRefunded",
                cancelled_at AS "cancelledAt", version
           FROM batches WHERE id = $1 AND account_id = $2`,
};

/**
 * The polling endpoint's batch read (GET /v1/batches/{id}, its hot path): a constant
 * statement for only the columns the response shows, aliased to the field names so no entity
 * is hydrated. Parsing unused columns and TypeORM's hydration were most of its CPU
 * (bench/findings.md, Polling).
 */
export async function selectBatchFields(db: DataSource, accountId: string, batchId: string): Promise<BatchFields | null> {
  const rows = await queryPrepared<BatchFields>(db, SELECT_BATCH_FIELDS, [batchId, accountId]);
  const row = rows[0];
  // bigint arrives as text.
  return row ? Object.assign(row, { version: Number(row.version) }) : null;
}

/** An account's batches newest first, keyset-paginated on (createdAt, id); one row past `limit` tells of a next page. */
export async function selectBatchPage(db: DataSource, accountId: string, limit: number, cursor: Cursor | null): Promise<BatchEntity[]> {
  const qb = db
    .getRepository(BatchEntity)
    .createQueryBuilder('b')
    .where('b.account_id = :accountId', { accountId })
    .orderBy('b.created_at', 'DESC')
    .addOrderBy('b.id', 'DESC')
    .limit(limit + 1);
  if (cursor) qb.andWhere('(b.created_at, b.id) < (:at, :id)', { at: cursor.createdAt, id: cursor.id });
  return qb.getMany();
}
