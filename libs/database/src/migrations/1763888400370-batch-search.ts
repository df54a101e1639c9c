import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The dashboard's batch filters and search (docs/dashboard.md, GET /v1/dashboard/batches):
 * trigram indexes on the lowered note and the lowered prompts' jsonb text answer a
 * "contains" search (LIKE '%text%', 3 characters or more) without reading every batch of an
 * account; (account, status) and (account, model), each ordered as the list pages, keep the
 * status and model filters a range read at 100,000 batches.
 */
export class BatchSearch1763888400370 implements MigrationInterface {
  name = 'BatchSearch1763888400370';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE EXTENSION IF NOT EXISTS pg_trgm`);
    await q.query(`CREATE INDEX "batches_note_trgm_idx" ON "batches" USING gin (lower("note") gin_trgm_ops)`);
    await q.query(`CREATE INDEX "batches_prompts_trgm_idx" ON "batches" USING gin (lower("prompts"::text) gin_trgm_ops)`);
    await q.query(`CREATE INDEX "batches_account_status_created_idx" ON "batches" ("account_id", "status", "created_at", "id")`);
    await q.query(`CREATE INDEX "batches_account_model_created_idx" ON "batches" ("account_id", "model", "created_at", "id")`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "batches_account_model_created_idx"`);
    await q.query(`DROP INDEX "batches_account_status_created_idx"`);
    await q.query(`DROP INDEX "batches_prompts_trgm_idx"`);
    await q.query(`DROP INDEX "batches_note_trgm_idx"`);
  }
}
