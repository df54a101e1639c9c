import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each webhook endpoint's circuit: how many attempts in a row it has failed, and until when
 * senders leave it alone once that count reached WEBHOOK_CIRCUIT_FAILURES. The partial index
 * serves the senders' claim, which skips the (few) endpoints whose circuit is open.
 */
export class WebhookCircuits1763888400170 implements MigrationInterface {
  name = 'WebhookCircuits1763888400170';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "webhook_endpoints" ADD "consecutive_failures" integer NOT NULL DEFAULT 0`);
    await q.query(`ALTER TABLE "webhook_endpoints" ADD "circuit_open_until" TIMESTAMP WITH TIME ZONE`);
    await q.query(
      `CREATE INDEX "webhook_endpoints_circuit_idx" ON "webhook_endpoints" ("circuit_open_until") WHERE circuit_open_until IS NOT NULL`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "webhook_endpoints_circuit_idx"`);
    await q.query(`ALTER TABLE "webhook_endpoints" DROP COLUMN "circuit_open_until"`);
    await q.query(`ALTER TABLE "webhook_endpoints" DROP COLUMN "consecutive_failures"`);
  }
}
