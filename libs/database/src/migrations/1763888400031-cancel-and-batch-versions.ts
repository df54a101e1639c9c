import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Cancel and conditional polling.
 * - tasks.sent_at: when the current attempt was handed to its provider (null while the
 *   worker that claimed it still waits for a model or render slot). A cancel takes every task
 *   not sent yet; the worker's fenced "send" write fails for a cancelled task, so it never
 *   sends it.
 * - batches.cancelled_count and cancelled_at: the cancel's tally, beside succeeded and failed.
 * - batches.version: bumped by every write that changes what GET /v1/batches/{id} shows, in
 *   the same statement; the ETag is made of it, so a conditional poll reads one row.
 */
export class CancelAndBatchVersions1763888400031 implements MigrationInterface {
  name = 'CancelAndBatchVersions1763888400031';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ADD "sent_at" TIMESTAMP WITH TIME ZONE`);
    await q.query(`ALTER TABLE "batches" ADD "cancelled_count" integer NOT NULL DEFAULT '0'`);
    await q.query(`ALTER TABLE "batches" ADD "cancelled_at" TIMESTAMP(3) WITH TIME ZONE`);
    await q.query(`ALTER TABLE "batches" ADD "version" bigint NOT NULL DEFAULT '0'`);
    // Tasks running when this migration runs were claimed by a generator of the previous
    // version, which may have sent them already: they count as sent.
    await q.query(`UPDATE "tasks" SET "sent_at" = COALESCE("started_at", now()) WHERE "status" = 'running'`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "batches" DROP COLUMN "version"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "cancelled_at"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "cancelled_count"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "sent_at"`);
  }
}
