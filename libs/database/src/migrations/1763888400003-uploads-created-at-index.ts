import { MigrationInterface, QueryRunner } from 'typeorm';

/** The retention purge (UploadsService.purgeExpired) reads the oldest uploads first; without this it scanned the table. */
export class UploadsCreatedAtIndex1763888400003 implements MigrationInterface {
  name = 'UploadsCreatedAtIndex1763888400003';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE INDEX "uploads_created_at_idx" ON "uploads" ("created_at") `);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP INDEX IF EXISTS "uploads_created_at_idx"`);
  }
}
