import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The holder's `lowCreditsThreshold` (docs/webhooks.md, `credits.low`): a batch charge that
 * takes the balance from at least it to below it writes one event. Null: no alert.
 */
export class LowCreditsThreshold1763888400341 implements MigrationInterface {
  name = 'LowCreditsThreshold1763888400341';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "accounts" ADD "low_credits_threshold" bigint,
      ADD CONSTRAINT "accounts_low_credits_threshold_positive" CHECK ("low_credits_threshold" > 0)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "accounts" DROP COLUMN "low_credits_threshold"`);
  }
}
