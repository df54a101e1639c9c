import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The feeder's order (TaskDispatchService.feed): pending tasks by seq, then age. Partial, so
 * it only ever holds the backlog and a task leaves it the moment it is queued.
 */
export class TasksPendingFairIndex1763888400002 implements MigrationInterface {
  name = 'TasksPendingFairIndex1763888400002';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX "tasks_pending_fair_idx" ON "tasks" ("seq", "created_at", "id") WHERE status = 'pending'`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS "tasks_pending_fair_idx"`);
  }
}
