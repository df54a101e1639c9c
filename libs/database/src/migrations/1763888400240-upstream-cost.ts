import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * What each task's upstream calls cost the operator, in integer micro-dollars (the route's
 * `cost` list price for what it made), written with the task's end so the usage report
 * (GET /v1/admin/usage) sums exact integers. 0 for local renders and unpriced routes.
 */
export class UpstreamCost1763888400240 implements MigrationInterface {
  name = 'UpstreamCost1763888400240';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ADD COLUMN "upstream_cost_micros" bigint NOT NULL DEFAULT 0`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "upstream_cost_micros"`);
  }
}
