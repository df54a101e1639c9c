import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The retention sweep (RetentionService) reads the oldest finished results and previews that
 * still have an object; the sweep clears the column it matched on, so these partial indexes
 * only ever hold what is left to sweep.
 */
export class RetentionIndexes1763888400004 implements MigrationInterface {
  name = 'RetentionIndexes1763888400004';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX "tasks_result_retention_idx" ON "tasks" ("finished_at") WHERE result_key IS NOT NULL`);
    await q.query(`CREATE INDEX "batches_preview_retention_idx" ON "batches" ("finished_at") WHERE preview_url IS NOT NULL`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS "batches_preview_retention_idx"`);
    await q.query(`DROP INDEX IF EXISTS "tasks_result_retention_idx"`);
  }
}
