import { DataSource } from 'typeorm';
import { deleteInRounds } from '@app/database';

/**
 * Keeps the delivery log bounded: removes, in bounded rounds, deliveries that settled
 * (`delivered` or `failed`) before `cutoff` (RETENTION_DAYS, the same promise as the images
 * they report), and every delivery of an endpoint that no longer exists (deleting an
 * endpoint removes only its row, so the request stays small however long its log). A pending
 * delivery of a live endpoint is kept until it settles. Idempotent: replicas may overlap.
 * Returns how many rows went.
 */
export async function sweepWebhookDeliveries(db: DataSource, cutoff: Date, batchSize = 1000): Promise<number> {
  const settled = await deleteInRounds(db, 'webhook_deliveries', `status <> 'pending' AND created_at < $2`, [cutoff], batchSize);
  const orphaned = await deleteInRounds(
    db,
    'webhook_deliveries',
    `NOT EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = webhook_deliveries.endpoint_id)`,
    [],
    batchSize,
  );
  return settled + orphaned;
}
