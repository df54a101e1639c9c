import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What Kiln needs to resume a request it made to a queue upstream (fal, Replicate, BFL)
 * instead of paying for it again: the upstream's request id and poll handle, written as soon
 * as the submit answers; when the task should next be polled (set while it waits, in the
 * pollers' hands); and which generator's poller holds it until when (a lease, so another
 * generator takes over a dead one's waiting tasks).
 */
export class UpstreamRequests1763888400160 implements MigrationInterface {
  name = 'UpstreamRequests1763888400160';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks"
      ADD COLUMN "upstream_request_id" text,
      ADD COLUMN "upstream_handle" jsonb,
      ADD COLUMN "upstream_submitted_at" timestamptz,
      ADD COLUMN "upstream_poll_at" timestamptz,
      ADD COLUMN "upstream_lease_until" timestamptz,
      ADD COLUMN "upstream_poller" text`);
    await q.query(
      `CREATE INDEX "tasks_upstream_waiting_idx" ON "tasks" ("upstream_poll_at") WHERE status = 'running' AND upstream_poll_at IS NOT NULL`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX "tasks_upstream_waiting_idx"`);
    await q.query(`ALTER TABLE "tasks"
      DROP COLUMN "upstream_request_id", DROP COLUMN "upstream_handle", DROP COLUMN "upstream_submitted_at",
      DROP COLUMN "upstream_poll_at", DROP COLUMN "upstream_lease_until", DROP COLUMN "upstream_poller"`);
  }
}
