import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A batch cancel that reaches the upstream: a task already accepted by a queue upstream that
 * has a cancel (fal, Replicate) is marked here by the api (`asked`); a generator takes it
 * (`sending`, under a lease so another takes over a dead one's), asks the upstream once and
 * records the answer: the task cancelled and refunded when the upstream confirms it did not
 * run (`confirmed`), else left to finish (`unconfirmed`). The partial index finds the cancels
 * still to send.
 */
export class UpstreamCancels1763888400290 implements MigrationInterface {
  name = 'UpstreamCancels1763888400290';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ADD COLUMN "upstream_cancel" text, ADD COLUMN "upstream_cancel_at" timestamptz`);
    await q.query(
      `CREATE INDEX "tasks_upstream_cancel_due_idx" ON "tasks" ("upstream_cancel_at") WHERE upstream_cancel IN ('asked', 'sending')`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "tasks_upstream_cancel_due_idx"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "upstream_cancel", DROP COLUMN "upstream_cancel_at"`);
  }
}
