import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The admin account list pages on (created_at, id) with a cursor that holds milliseconds
 * (like the batch list, whose created_at has been timestamptz(3) from the start). With
 * microseconds stored, accounts created in the same millisecond as a page's last one, but
 * after it, fell between the pages.
 */
export class AccountsCreatedAtMilliseconds1763888400005 implements MigrationInterface {
  name = 'AccountsCreatedAtMilliseconds1763888400005';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "accounts" ALTER COLUMN "created_at" TYPE TIMESTAMP(3) WITH TIME ZONE`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "accounts" ALTER COLUMN "created_at" TYPE TIMESTAMP WITH TIME ZONE`);
  }
}
