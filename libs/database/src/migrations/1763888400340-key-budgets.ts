import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-key budgets (docs/billing.md#per-key-budgets): credits per UTC day, week or month, and
 * an allowlist of models (empty: every model). v1's credit_cap_per_day stays where it is, as
 * the spelling of a day budget set through `creditCapPerDay`; setting either spelling clears
 * the other, so a key has at most one budget.
 */
export class KeyBudgets1763888400340 implements MigrationInterface {
  name = 'KeyBudgets1763888400340';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "api_keys"
      ADD "budget_credits" integer,
      ADD "budget_period" text,
      ADD "models" text array NOT NULL DEFAULT '{}',
      ADD CONSTRAINT "api_keys_budget_period" CHECK ("budget_period" IN ('day', 'week', 'month')),
      ADD CONSTRAINT "api_keys_budget_whole" CHECK (("budget_credits" IS NULL) = ("budget_period" IS NULL)),
      ADD CONSTRAINT "api_keys_budget_positive" CHECK ("budget_credits" > 0)`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "api_keys" DROP COLUMN "models", DROP COLUMN "budget_period", DROP COLUMN "budget_credits"`);
  }
}
