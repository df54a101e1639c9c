import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A model rides on a chain of routes (docs/providers.md "A chain of routes"): `routes`, whose
 * first is the `provider` every existing reader keeps using, and its `failover` settings
 * (null: the defaults); a model with null routes (one written before this, or outside the
 * admin API) rides on its provider alone. Batches snapshot both at creation; a batch made before this (null
 * routes) rides on its provider alone. Each task records the route that made its image
 * (route_index into its batch's chain), which is also the route its next attempt goes to.
 */
export class RouteChains1763888400350 implements MigrationInterface {
  name = 'RouteChains1763888400350';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "models" ADD "routes" jsonb, ADD "failover" jsonb`);
    await q.query(`ALTER TABLE "models"
      ADD CONSTRAINT "models_routes_chain" CHECK (jsonb_typeof("routes") = 'array' AND jsonb_array_length("routes") BETWEEN 1 AND 5)`);
    await q.query(`ALTER TABLE "batches" ADD "routes" jsonb, ADD "failover" jsonb`);
    await q.query(`ALTER TABLE "tasks" ADD "route_index" smallint NOT NULL DEFAULT 0`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "route_index"`);
    await q.query(`ALTER TABLE "batches" DROP COLUMN "routes", DROP COLUMN "failover"`);
    await q.query(`ALTER TABLE "models" DROP CONSTRAINT "models_routes_chain", DROP COLUMN "routes", DROP COLUMN "failover"`);
  }
}
