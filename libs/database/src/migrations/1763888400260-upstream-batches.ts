import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The economy tier's upstream batches: one row per group of economy tasks the generator's
 * collector sends to an upstream's batch API, written BEFORE each step it takes (the group
 * and its tasks before the upload, the input id before the create, the upstream batch id
 * before any wait), so a crash at any step resumes the group and never submits a task twice.
 * Several generators share the rows by lease (poller, lease_until). Tasks point at their
 * group (tasks.upstream_batch_id, now a foreign key).
 */
export class UpstreamBatches1763888400260 implements MigrationInterface {
  name = 'UpstreamBatches1763888400260';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "upstream_batches" (
      "id" uuid NOT NULL DEFAULT gen_random_uuid(),
      "model" text NOT NULL,
      "provider" jsonb NOT NULL,
      "state" text NOT NULL DEFAULT 'collecting',
      "lines" integer NOT NULL,
      "input_id" text,
      "upstream_batch_id" text,
      "upstream_state" jsonb,
      "upstream_status" text,
      "found" jsonb,
      "outcome" text,
      "succeeded_count" integer NOT NULL DEFAULT 0,
      "failed_count" integer NOT NULL DEFAULT 0,
      "tries" integer NOT NULL DEFAULT 0,
      "last_error" text,
      "poll_at" timestamptz NOT NULL DEFAULT now(),
      "poller" text,
      "lease_until" timestamptz,
      "created_at" timestamptz NOT NULL DEFAULT now(),
      "updated_at" timestamptz NOT NULL DEFAULT now(),
      "finished_at" timestamptz,
      CONSTRAINT "upstream_batches_state_known" CHECK ("state" IN ('collecting', 'uploaded', 'created', 'ended', 'read', 'failed')),
      CONSTRAINT "PK_upstream_batches" PRIMARY KEY ("id")
    )`);
    await q.query(`CREATE INDEX "upstream_batches_due_idx" ON "upstream_batches" ("poll_at") WHERE state NOT IN ('read', 'failed')`);
    await q.query(
      `ALTER TABLE "tasks" ADD CONSTRAINT "tasks_upstream_batch_fk" FOREIGN KEY ("upstream_batch_id") REFERENCES "upstream_batches"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" DROP CONSTRAINT "tasks_upstream_batch_fk"`);
    await q.query(`DROP TABLE "upstream_batches"`);
  }
}
