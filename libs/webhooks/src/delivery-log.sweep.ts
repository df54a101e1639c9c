import { DataSource } from 'typeorm';
import { queryRows } from '@app/database';

/**
 * Keeps the delivery log bounded: removes, in bounded rounds, deliveries that settled
 * (`delivered` or `failed`) before `cutoff` (RETENTION_DAYS, the same promise as the images
 * they report), and every delivery of an endpoint that no longer exists (deleting an
 * endpoint removes only its row, so the request stays small however long its log). A pending
 * delivery of a live endpoint is kept until it settles. Idempotent: replicas may overlap.
 * Returns how many rows went.
 */
export async function sweepWebhookDeliveries(db: DataSource, cutoff: Date, batchSize = 1000): Promise<number> {
  let removed = 0;
  for (const where of [
    `d.status <> 'pending' AND d.created_at < $2`,
    `NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id)`,
  ]) {
    for (;;) {
      const rows = await queryRows(
        db,
        `DELETE FROM webhook_deliveries WHERE ctid IN (SELECT d.ctid FROM webhook_deliveries d WHERE ${where} LIMIT $1) RETURNING 1`,
        where.includes('$2') ? [batchSize, cutoff] : [batchSize],
      );
      removed += rows.length;
      if (rows.length < batchSize) break;
    }
  }
  return removed;
}
