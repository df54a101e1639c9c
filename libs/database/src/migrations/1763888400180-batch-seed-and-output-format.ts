import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A batch's own seed (task n renders with seed + n - 1; null: each task's is drawn from the
 * batch id as before) and the format its images are stored and served in.
 */
export class BatchSeedAndOutputFormat1763888400180 implements MigrationInterface {
  name = 'BatchSeedAndOutputFormat1763888400180';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "batches" ADD "seed" integer`);
    await q.query(`ALTER TABLE "batches" ADD "output_format" text NOT NULL DEFAULT 'png'`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "batches" DROP COLUMN "output_format"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "seed"`);
  }
}
