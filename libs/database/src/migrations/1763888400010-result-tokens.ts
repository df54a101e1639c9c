import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Each task's own random token, drawn at its first claim and kept across attempts: its
 * result's key is made from it, so every attempt writes the same object (a redo overwrites
 * what a crashed attempt left). Existing rows keep their keys and URLs. The orphan sweep
 * (OrphanSweepService) looks objects up by result key, by token and by preview URL.
 */
export class ResultTokens1763888400010 implements MigrationInterface {
  name = 'ResultTokens1763888400010';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ADD "result_token" text`);
    await q.query(`CREATE UNIQUE INDEX "tasks_result_token_idx" ON "tasks" ("result_token") `);
    await q.query(`CREATE INDEX "tasks_result_key_idx" ON "tasks" ("result_key") WHERE result_key IS NOT NULL`);
    await q.query(`CREATE INDEX "batches_preview_url_idx" ON "batches" ("preview_url") WHERE preview_url IS NOT NULL`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS "batches_preview_url_idx"`);
    await q.query(`DROP INDEX IF EXISTS "tasks_result_key_idx"`);
    await q.query(`DROP INDEX IF EXISTS "tasks_result_token_idx"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "result_token"`);
  }
}
