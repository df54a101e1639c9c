import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Webhook endpoints and their deliveries (the outbox and the delivery log), and the new
 * `webhooks:manage` scope for the keys that hold every scope there was before it: a key made
 * with all scopes meant "everything", a key made with fewer keeps exactly those.
 */
export class Webhooks1763888400140 implements MigrationInterface {
  name = 'Webhooks1763888400140';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "webhook_deliveries" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "event_id" text NOT NULL, "endpoint_id" uuid NOT NULL, "account_id" uuid NOT NULL, "type" text NOT NULL, "body" text NOT NULL, "status" text NOT NULL DEFAULT 'pending', "attempts" integer NOT NULL DEFAULT '0', "next_attempt_at" TIMESTAMP WITH TIME ZONE, "last_status_code" integer, "last_error" text, "delivered_at" TIMESTAMP WITH TIME ZONE, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_535dd409947fb6d8fc6dfc0112a" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "webhook_deliveries_due_idx" ON "webhook_deliveries" ("next_attempt_at") WHERE status = 'pending'`);
    await q.query(`CREATE INDEX "webhook_deliveries_endpoint_created_idx" ON "webhook_deliveries" ("endpoint_id", "created_at", "id") `);
    await q.query(`CREATE UNIQUE INDEX "webhook_deliveries_event_endpoint_unique" ON "webhook_deliveries" ("event_id", "endpoint_id") `);
    await q.query(
      `CREATE TABLE "webhook_endpoints" ("id" uuid NOT NULL, "account_id" uuid NOT NULL, "url" text NOT NULL, "events" text array NOT NULL, "description" text, "secret_enc" text NOT NULL, "previous_secret_enc" text, "previous_secret_expires_at" TIMESTAMP WITH TIME ZONE, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "disabled_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_054c4cfb95223732f5939d2d546" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "webhook_endpoints_account_idx" ON "webhook_endpoints" ("account_id") `);
    await q.query(
      `ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "FK_198873590dd372c0bb12ff2a248" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "webhook_endpoints" ADD CONSTRAINT "FK_4d6b730495c4aea409766707c49" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `UPDATE api_keys SET scopes = array_append(scopes, 'webhooks:manage')
        WHERE scopes @> ARRAY['models:read', 'account:read', 'batches:read', 'batches:write', 'uploads:write']::text[]
          AND NOT scopes @> ARRAY['webhooks:manage']::text[]`,
    );
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`UPDATE api_keys SET scopes = array_remove(scopes, 'webhooks:manage')`);
    await q.query(`ALTER TABLE "webhook_endpoints" DROP CONSTRAINT "FK_4d6b730495c4aea409766707c49"`);
    await q.query(`ALTER TABLE "webhook_deliveries" DROP CONSTRAINT "FK_198873590dd372c0bb12ff2a248"`);
    await q.query(`DROP TABLE "webhook_endpoints"`);
    await q.query(`DROP TABLE "webhook_deliveries"`);
  }
}
