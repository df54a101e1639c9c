import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each endpoint's pending deliveries in due order: the senders' claim takes one look per
 * endpoint with work (a loose index scan over endpoint_id, then its oldest due deliveries), so
 * its cost follows the endpoints with a backlog, not the length of any backlog. With the id
 * the claim reads the index alone.
 */
export class WebhookEndpointDue1763888400310 implements MigrationInterface {
  name = 'WebhookEndpointDue1763888400310';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE INDEX "webhook_deliveries_endpoint_due_idx" ON "webhook_deliveries" ("endpoint_id", "next_attempt_at", "id") WHERE status = 'pending'`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "webhook_deliveries_endpoint_due_idx"`);
  }
}
