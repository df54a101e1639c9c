import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * An image no price covers is recorded as unpriced (NULL), never at $0: the usage report
 * counts such images (`unpricedImages`) instead of showing a margin that is not there. Rows
 * written before stay as they are (0 then meant "priced at nothing or unpriced").
 */
export class UnpricedCost1763888400270 implements MigrationInterface {
  name = 'UnpricedCost1763888400270';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ALTER COLUMN "upstream_cost_micros" DROP NOT NULL`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE "tasks" SET "upstream_cost_micros" = 0 WHERE "upstream_cost_micros" IS NULL`);
    await q.query(`ALTER TABLE "tasks" ALTER COLUMN "upstream_cost_micros" SET NOT NULL`);
  }
}
