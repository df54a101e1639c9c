import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The economy tier (half price, results within the model's window, run through upstream
 * batch APIs): the batch's tier and the time by which every task has ended; the tier copied
 * onto each task so the standard feeder's index never holds an economy task (standard work
 * never waits behind economy work) and the collector has its own; the upstream batch a task
 * was submitted in (null until then: a cancel still cancels it); the model's economy prices
 * and window; each plan's cap on active economy batches.
 */
export class EconomyTier1763888400250 implements MigrationInterface {
  name = 'EconomyTier1763888400250';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(
      `ALTER TABLE "batches" ADD COLUMN "tier" text NOT NULL DEFAULT 'standard', ADD CONSTRAINT "batches_tier_known" CHECK ("tier" IN ('standard', 'economy'))`,
    );
    await q.query(`ALTER TABLE "batches" ADD COLUMN "expires_at" timestamptz(3)`);
    await q.query(
      `ALTER TABLE "tasks" ADD COLUMN "tier" text NOT NULL DEFAULT 'standard', ADD CONSTRAINT "tasks_tier_known" CHECK ("tier" IN ('standard', 'economy'))`,
    );
    await q.query(`ALTER TABLE "tasks" ADD COLUMN "upstream_batch_id" uuid`);
    await q.query(`ALTER TABLE "models" ADD COLUMN "economy_credit_cost" jsonb`);
    await q.query(`ALTER TABLE "models" ADD COLUMN "economy_window_hours" integer`);
    await q.query(`ALTER TABLE "plans" ADD COLUMN "max_concurrent_economy_batches" integer NOT NULL DEFAULT 0`);
    await q.query(
      `UPDATE plans SET max_concurrent_economy_batches = CASE key WHEN 'free' THEN 0 WHEN 'starter' THEN 2 WHEN 'studio' THEN 10 WHEN 'scale' THEN 50 ELSE 0 END`,
    );
    // The feeder's index holds standard tasks only; economy tasks waiting for an upstream batch have their own.
    await q.query(`DROP INDEX IF EXISTS "tasks_pending_fair_idx"`);
    await q.query(
      `CREATE INDEX "tasks_pending_fair_idx" ON "tasks" ("seq", "created_at", "id") WHERE status = 'pending' AND tier = 'standard'`,
    );
    await q.query(`CREATE INDEX "tasks_economy_waiting_idx" ON "tasks" ("created_at", "id") WHERE status = 'pending' AND tier = 'economy'`);
    await q.query(`CREATE INDEX "tasks_upstream_batch_idx" ON "tasks" ("upstream_batch_id") WHERE upstream_batch_id IS NOT NULL`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS "tasks_upstream_batch_idx"`);
    await q.query(`DROP INDEX IF EXISTS "tasks_economy_waiting_idx"`);
    await q.query(`DROP INDEX IF EXISTS "tasks_pending_fair_idx"`);
    await q.query(`CREATE INDEX "tasks_pending_fair_idx" ON "tasks" ("seq", "created_at", "id") WHERE status = 'pending'`);
    await q.query(`ALTER TABLE "plans" DROP COLUMN "max_concurrent_economy_batches"`);
    await q.query(`ALTER TABLE "models" DROP COLUMN "economy_window_hours"`);
    await q.query(`ALTER TABLE "models" DROP COLUMN "economy_credit_cost"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "upstream_batch_id"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "tier"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "expires_at"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "tier"`);
  }
}
