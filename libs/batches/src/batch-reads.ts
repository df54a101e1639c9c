import { DataSource } from 'typeorm';
import { BatchEntity, Cursor, PreparedStatement, queryPrepared } from '@app/database';
import { BatchFields } from '@app/tasks';
import { BatchFilter, likeContaining } from './batch-filter';

/*
 * The batch row's reads for the API. Its writes (the insert, the tallies, the cancel, the
 * retention sweep's preview clear) are the tasks lib's: see libs/tasks/src/batch-row.ts.
 */

/** Every full poll runs it: prepared once per connection. */
const SELECT_BATCH_FIELDS: PreparedStatement = {
  name: 'kiln_select_batch_fields',
  text: `SELECT id, created_at AS "createdAt", prompts, model, aspect_ratio AS "aspectRatio", resolution, quality,
                background, count_per_combo AS "countPerCombo", ref_mode AS "refMode", ref_images AS "refImages", total,
                note, seed, output_format AS "outputFormat", preview_url AS "previewUrl", created_via_api AS "createdViaApi", status,
                credits_charged AS "creditsCharged", credits_refunded AS "creditsRefunded",
                cancelled_at AS "cancelledAt", version, tier, expires_at AS "expiresAt", deadline, cancel_reason AS "cancelReason"
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
export async function selectBatchPage(
  db: DataSource,
  accountId: string,
  limit: number,
  cursor: Cursor | null,
  filter: BatchFilter = {},
): Promise<BatchEntity[]> {
  const qb = db
    .getRepository(BatchEntity)
    .createQueryBuilder('b')
    .where('b.account_id = :accountId', { accountId })
    .orderBy('b.created_at', 'DESC')
    .addOrderBy('b.id', 'DESC')
    .limit(limit + 1);
  if (cursor) qb.andWhere('(b.created_at, b.id) < (:at, :id)', { at: cursor.createdAt, id: cursor.id });
  if (filter.statuses) qb.andWhere('b.status IN (:...statuses)', { statuses: filter.statuses });
  if (filter.model) qb.andWhere('b.model = :model', { model: filter.model });
  if (filter.from) qb.andWhere('b.created_at >= :from', { from: filter.from });
  if (filter.to) qb.andWhere('b.created_at < :to', { to: filter.to });
  if (filter.text) {
    // Both expressions are the trigram indexes' (migration 1763888400370), so a search of
    // 3 characters or more reads the index, not every batch of the account. The prompts are
    // searched in their jsonb text, where a quote or a backslash is escaped as JSON escapes it.
    qb.andWhere(`(lower(b.note) LIKE lower(:noteLike) OR lower(b.prompts::text) LIKE lower(:promptsLike))`, {
      noteLike: likeContaining(filter.text),
      promptsLike: likeContaining(JSON.stringify(filter.text).slice(1, -1)),
    });
  }
  return qb.getMany();
}
