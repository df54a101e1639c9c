import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The prompts Kiln refuses as catalog data operators edit (GET/PUT /v1/admin/content-policy)
 * instead of a list in the code. Seeded with the list the code held: a keyword screen for
 * requests unambiguous about wanting sexual content involving minors.
 */
export const SEEDED_BLOCKED_TERMS: readonly string[] = [
  'csam',
  'child porn',
  'child pornography',
  'child sexual abuse material',
  'underage porn',
  'underage nude',
  'underage nudes',
  'nude child',
  'nude children',
  'naked child',
  'naked children',
  'loli porn',
  'lolicon',
  'pedophile porn',
];

export class ContentPolicyTerms1763888400150 implements MigrationInterface {
  name = 'ContentPolicyTerms1763888400150';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`CREATE TABLE "content_policy_terms" ("term" text PRIMARY KEY, "created_at" timestamptz NOT NULL DEFAULT now())`);
    await q.query(`INSERT INTO "content_policy_terms" ("term") SELECT unnest($1::text[])`, [SEEDED_BLOCKED_TERMS]);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`DROP TABLE "content_policy_terms"`);
  }
}
