import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A model's own pairs kept apart from what its route offers: `own_resolutions_by_ratio` is
 * what the operator (or the model's preset at creation) gave; `resolutions_by_ratio` stays
 * what clients are offered, the own pairs its route makes honestly, written by the catalog
 * with every edit. Routing to a narrower route and back then restores the pairs. Today's
 * offer is the best record of each model's own pairs there is.
 */
export class ModelOwnPairs1763888400280 implements MigrationInterface {
  name = 'ModelOwnPairs1763888400280';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "models" ADD COLUMN "own_resolutions_by_ratio" jsonb`);
    await q.query(`UPDATE "models" SET "own_resolutions_by_ratio" = "resolutions_by_ratio"`);
    await q.query(`ALTER TABLE "models" ALTER COLUMN "own_resolutions_by_ratio" SET NOT NULL`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "models" DROP COLUMN "own_resolutions_by_ratio"`);
  }
}
