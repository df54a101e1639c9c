import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Batch deadlines (docs/api.md#deadlines): a batch may carry `deadline`; its tasks not yet
 * sent by then are cancelled and refunded as a cancel would. `cancel_reason` says why a
 * batch's cancelled_at was set ('deadline'; null for a caller's cancel). The partial index
 * keeps the generator's deadline sweep to the few open batches that have one.
 */
export class BatchDeadlines1763888400330 implements MigrationInterface {
  name = 'BatchDeadlines1763888400330';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "batches" ADD "deadline" TIMESTAMP(3) WITH TIME ZONE`);
    await q.query(`ALTER TABLE "batches" ADD "cancel_reason" text`);
    await q.query(`CREATE INDEX "batches_open_deadline_idx" ON "batches" ("deadline") WHERE deadline IS NOT NULL AND finished_at IS NULL`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "batches_open_deadline_idx"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "cancel_reason"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "deadline"`);
  }
}
