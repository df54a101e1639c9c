import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * OpenAI model names (such as gpt-image-1) an operator gives a model: the OpenAI-compatible
 * door accepts them as the model's key. Unique across models (checked under a lock on edit).
 */
export class ModelOpenAiAliases1763888400300 implements MigrationInterface {
  name = 'ModelOpenAiAliases1763888400300';

  public async up(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "models" ADD COLUMN "openai_aliases" text[] NOT NULL DEFAULT '{}'`);
  }

  public async down(q: QueryRunner): Promise<void> {
    await q.query(`ALTER TABLE "models" DROP COLUMN "openai_aliases"`);
  }
}
