import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Selling credits (docs/billing.md): the packs operators define, and one row per paid
 * Checkout Session, whose unique session id makes each purchase credit once.
 *
 * A refund takes the refunded share of a purchase back even when those credits were spent,
 * so a balance may now go below zero (batches are then refused with insufficient_credits);
 * the CHECK that forbade it goes. Charges and downward adjustments still refuse to overdraw
 * in their own conditional UPDATEs (libs/billing).
 */
export class CreditPurchases1763888400320 implements MigrationInterface {
  name = 'CreditPurchases1763888400320';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "credit_packs" (
      "id" uuid NOT NULL DEFAULT gen_random_uuid(),
      "name" text NOT NULL,
      "credits" bigint NOT NULL,
      "price_cents" bigint NOT NULL,
      "currency" text NOT NULL,
      "active" boolean NOT NULL DEFAULT true,
      "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
      CONSTRAINT "credit_packs_credits_positive" CHECK ("credits" > 0),
      CONSTRAINT "credit_packs_price_positive" CHECK ("price_cents" > 0),
      CONSTRAINT "credit_packs_currency_iso" CHECK ("currency" ~ '^[a-z]{3}$'),
      CONSTRAINT "PK_credit_packs" PRIMARY KEY ("id")
    )`);
    await q.query(`CREATE TABLE "credit_purchases" (
      "id" uuid NOT NULL DEFAULT gen_random_uuid(),
      "account_id" uuid NOT NULL,
      "pack_id" uuid,
      "checkout_session_id" text NOT NULL,
      "payment_intent_id" text,
      "credits" bigint NOT NULL,
      "amount" bigint NOT NULL,
      "currency" text NOT NULL,
      "credits_refunded" bigint NOT NULL DEFAULT '0',
      "amount_refunded" bigint NOT NULL DEFAULT '0',
      "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(),
      CONSTRAINT "credit_purchases_refund_within" CHECK ("credits_refunded" >= 0 AND "credits_refunded" <= "credits"),
      CONSTRAINT "PK_credit_purchases" PRIMARY KEY ("id")
    )`);
    await q.query(`CREATE UNIQUE INDEX "credit_purchases_session_once" ON "credit_purchases" ("checkout_session_id")`);
    await q.query(
      `CREATE UNIQUE INDEX "credit_purchases_payment_intent_idx" ON "credit_purchases" ("payment_intent_id") WHERE payment_intent_id IS NOT NULL`,
    );
    await q.query(`CREATE INDEX "credit_purchases_account_idx" ON "credit_purchases" ("account_id", "created_at")`);
    await q.query(
      `ALTER TABLE "credit_purchases" ADD CONSTRAINT "credit_purchases_account_fk" FOREIGN KEY ("account_id") REFERENCES "accounts"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await q.query(
      `ALTER TABLE "credit_purchases" ADD CONSTRAINT "credit_purchases_pack_fk" FOREIGN KEY ("pack_id") REFERENCES "credit_packs"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
    await q.query(`ALTER TABLE "accounts" DROP CONSTRAINT "accounts_balance_never_negative"`);
  }

  public async down(q: QueryRunner): Promise<void> {
    // Fails while a balance is below zero: settle those accounts first.
    await q.query(`ALTER TABLE "accounts" ADD CONSTRAINT "accounts_balance_never_negative" CHECK ("balance" >= 0)`);
    await q.query(`DROP TABLE "credit_purchases"`);
    await q.query(`DROP TABLE "credit_packs"`);
  }
}
