import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A queue upstream's submit is recorded as an intent (committed) before the call: a task
 * found after a crash with an intent and no request id may have been taken upstream, and is
 * looked up there where the type can (its lookup key is what finds the request again), or
 * handled by the route's `onUnknownSubmit`. Cleared when the submit's answer says the
 * upstream did not take it, or when a new submit follows the upstream's failure.
 */
export class SubmitIntents1763888400360 implements MigrationInterface {
  name = 'SubmitIntents1763888400360';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ADD COLUMN "submit_intent_at" timestamptz, ADD COLUMN "submit_intent" jsonb`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "submit_intent_at", DROP COLUMN "submit_intent"`);
  }
}
