import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Interface v1.1: each task records why it failed (error_code) and the real pixel size of its
 * stored result (an upstream may map the asked size to another); the idempotency_keys table
 * remembers batch creations by (account, Idempotency-Key), its primary key being what keeps
 * racing requests with one key to one batch. Existing tasks keep nulls (their size and the
 * cause of their failure were not recorded).
 */
export class TaskDetailsAndIdempotencyKeys1763888400030 implements MigrationInterface {
  name = 'TaskDetailsAndIdempotencyKeys1763888400030';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "tasks" ADD "error_code" text`);
    await q.query(`ALTER TABLE "tasks" ADD "result_width" integer`);
    await q.query(`ALTER TABLE "tasks" ADD "result_height" integer`);
    await q.query(
      `CREATE TABLE "idempotency_keys" ("account_id" uuid NOT NULL, "key" text NOT NULL, "request_hash" text NOT NULL,
         "response" jsonb NOT NULL, "batch_id" uuid NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
         CONSTRAINT "PK_797bef48c094807d04973d995e9" PRIMARY KEY ("account_id", "key"))`,
    );
    await q.query(`CREATE INDEX "idempotency_keys_created_idx" ON "idempotency_keys" ("created_at") `);
    await q.query(
      `ALTER TABLE "idempotency_keys" ADD CONSTRAINT "FK_2fce765c0a9afca71085de67556" FOREIGN KEY ("account_id")
         REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "idempotency_keys"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "result_height"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "result_width"`);
    await q.query(`ALTER TABLE "tasks" DROP COLUMN "error_code"`);
  }
}
