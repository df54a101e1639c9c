import { MigrationInterface, QueryRunner } from 'typeorm';

export class InitialSchema1763888400000 implements MigrationInterface {
  name = 'InitialSchema1763888400000';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(
      `CREATE TABLE "plans" ("key" text NOT NULL, "api_access" boolean NOT NULL, "max_keys" integer NOT NULL, "max_images_per_batch" integer NOT NULL, "max_concurrent_batches" integer NOT NULL, "requests_per_minute" integer NOT NULL, CONSTRAINT "PK_81fbbbb81d6b241363f82c17b09" PRIMARY KEY ("key"))`,
    );
    await q.query(
      `CREATE TABLE "accounts" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "email" text NOT NULL, "password_hash" text, "plan_key" text NOT NULL, "status" text NOT NULL DEFAULT 'active', "balance" bigint NOT NULL DEFAULT '0', "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "accounts_balance_never_negative" CHECK ("balance" >= 0), CONSTRAINT "PK_5a7a02c20412299d198e097a8fe" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE TABLE "api_keys" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "account_id" uuid NOT NULL, "name" text NOT NULL, "key_hash" text NOT NULL, "hint" text NOT NULL, "scopes" text array NOT NULL, "credit_cap_per_day" integer, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "last_used_at" TIMESTAMP WITH TIME ZONE, "revoked_at" TIMESTAMP WITH TIME ZONE, "expires_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_5c8a79801b44bd27b79228e1dad" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "api_keys_hash_unique" ON "api_keys" ("key_hash") `);
    await q.query(`CREATE INDEX "api_keys_account_idx" ON "api_keys" ("account_id") `);
    await q.query(
      `CREATE TABLE "models" ("key" text NOT NULL, "display_name" text NOT NULL, "blurb" text NOT NULL, "credit_cost" jsonb NOT NULL, "resolutions_by_ratio" jsonb NOT NULL, "supports_ref_images" boolean NOT NULL, "max_ref_images" integer, "supports_quality" boolean NOT NULL, "supports_background" boolean NOT NULL, "max_prompt_length" integer NOT NULL DEFAULT '4000', "enabled" boolean NOT NULL DEFAULT true, "provider" jsonb NOT NULL, "sort_order" integer NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_7ee3cc2e1c50793891442062c37" PRIMARY KEY ("key"))`,
    );
    await q.query(
      `CREATE TABLE "batches" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "account_id" uuid NOT NULL, "api_key_id" uuid, "prompts" jsonb NOT NULL, "model" text NOT NULL, "aspect_ratio" text NOT NULL, "resolution" text NOT NULL, "quality" text NOT NULL, "background" text, "count_per_combo" integer NOT NULL, "ref_mode" text NOT NULL, "ref_images" jsonb NOT NULL, "total" integer NOT NULL, "note" text, "unit_cost" integer NOT NULL, "credits_charged" integer NOT NULL, "credits_refunded" integer NOT NULL DEFAULT '0', "provider" jsonb NOT NULL, "width" integer NOT NULL, "height" integer NOT NULL, "status" text NOT NULL DEFAULT 'pending', "succeeded_count" integer NOT NULL DEFAULT '0', "failed_count" integer NOT NULL DEFAULT '0', "preview_url" text, "created_via_api" boolean NOT NULL, "created_at" TIMESTAMP(3) WITH TIME ZONE NOT NULL DEFAULT now(), "finished_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_55e7ff646e969b61d37eea5be7a" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "batches_unfinished_idx" ON "batches" ("account_id") WHERE finished_at IS NULL`);
    await q.query(`CREATE INDEX "batches_account_created_idx" ON "batches" ("account_id", "created_at", "id") `);
    await q.query(
      `CREATE TABLE "ledger_entries" ("id" BIGSERIAL NOT NULL, "account_id" uuid NOT NULL, "amount" bigint NOT NULL, "balance_after" bigint NOT NULL, "kind" text NOT NULL, "reason" text, "batch_id" uuid, "task_id" uuid, "api_key_id" uuid, "charge_day" date, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_6efcb84411d3f08b08450ae75d5" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "ledger_task_refund_once" ON "ledger_entries" ("task_id") WHERE kind = 'task_refund'`);
    await q.query(`CREATE UNIQUE INDEX "ledger_batch_charge_once" ON "ledger_entries" ("batch_id") WHERE kind = 'batch_charge'`);
    await q.query(`CREATE INDEX "ledger_key_day_idx" ON "ledger_entries" ("api_key_id", "charge_day") `);
    await q.query(`CREATE INDEX "ledger_account_created_idx" ON "ledger_entries" ("account_id", "created_at", "id") `);
    await q.query(
      `CREATE TABLE "sessions" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "account_id" uuid NOT NULL, "token_hash" text NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, "revoked_at" TIMESTAMP WITH TIME ZONE, CONSTRAINT "PK_3238ef96f18b355b671619111bc" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE UNIQUE INDEX "sessions_token_hash_unique" ON "sessions" ("token_hash") `);
    await q.query(`CREATE INDEX "sessions_account_idx" ON "sessions" ("account_id") `);
    await q.query(
      `CREATE TABLE "tasks" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "batch_id" uuid NOT NULL, "account_id" uuid NOT NULL, "seq" integer NOT NULL, "prompt" text NOT NULL, "ref_upload_ids" uuid array NOT NULL DEFAULT '{}', "seed" integer NOT NULL, "status" text NOT NULL DEFAULT 'pending', "progress" integer NOT NULL DEFAULT '0', "attempts" integer NOT NULL DEFAULT '0', "result_url" text, "result_key" text, "error" text, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "started_at" TIMESTAMP WITH TIME ZONE, "finished_at" TIMESTAMP WITH TIME ZONE, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_8d12ff38fcc62aaba2cab748772" PRIMARY KEY ("id"))`,
    );
    await q.query(
      `CREATE INDEX "tasks_unfinished_idx" ON "tasks" ("status", "updated_at") WHERE status IN ('pending', 'queued', 'running')`,
    );
    await q.query(`CREATE UNIQUE INDEX "tasks_batch_seq_idx" ON "tasks" ("batch_id", "seq") `);
    await q.query(
      `CREATE TABLE "uploads" ("id" uuid NOT NULL DEFAULT gen_random_uuid(), "account_id" uuid NOT NULL, "storage_key" text NOT NULL, "url" text NOT NULL, "name" text NOT NULL, "content_type" text NOT NULL, "bytes" integer NOT NULL, "width" integer NOT NULL, "height" integer NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "PK_d1781d1eedd7459314f60f39bd3" PRIMARY KEY ("id"))`,
    );
    await q.query(`CREATE INDEX "uploads_account_url_idx" ON "uploads" ("account_id", "url") `);
    await q.query(
      `ALTER TABLE "accounts" ADD CONSTRAINT "FK_49bc8ae8ea853d5af02cb5b9c52" FOREIGN KEY ("plan_key") REFERENCES "plans"("key") ON DELETE NO ACTION ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "api_keys" ADD CONSTRAINT "FK_decaf331589778e33441b2a8d9e" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "batches" ADD CONSTRAINT "FK_6b25f5e71e65c51dd468b087afb" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "ledger_entries" ADD CONSTRAINT "FK_e4440167e470be69f9622c1ceab" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "sessions" ADD CONSTRAINT "FK_da0cf19646ff5c6e3c0284468e5" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "tasks" ADD CONSTRAINT "FK_3217c7b49812760a918345b7cad" FOREIGN KEY ("batch_id") REFERENCES "batches"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "uploads" ADD CONSTRAINT "FK_3615618f42403de188a15fb9408" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    // Emails compare case-insensitively; TypeORM cannot express an index on an expression.
    await q.query(`CREATE UNIQUE INDEX "accounts_email_lower_unique" ON "accounts" (lower("email"))`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE IF EXISTS "uploads" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "tasks" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "sessions" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "ledger_entries" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "batches" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "models" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "api_keys" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "accounts" CASCADE`);
    await q.query(`DROP TABLE IF EXISTS "plans" CASCADE`);
  }
}
