import { EntityManager } from 'typeorm';
import { ModelEntity, queryRows } from '@app/database';
import { invalidRequest } from '@app/errors';

/** How many OpenAI names one model may answer to: a few (gpt-image-1, its mini, dall-e-3), not a catalog of its own. */
export const MAX_OPENAI_ALIASES = 5;

/**
 * OpenAI's model-name grammar (gpt-image-1, gpt-image-1.5, dall-e-3, chatgpt-image-latest):
 * lowercase letters and digits in words joined by single hyphens or dots, at most 64 characters.
 */
export const OPENAI_MODEL_NAME = /^(?=.{1,64}$)[a-z0-9]+(?:[.-][a-z0-9]+)*$/;

/** Every OpenAI alias edit holds this transaction lock, so two edits never give one name to two models. */
const ALIAS_LOCK = 'kiln.models.openai_aliases';

/** An operator's `openaiAliases` as given: a short list of distinct OpenAI model names. */
export function validateOpenAiAliases(aliases: unknown): string[] {
  if (!Array.isArray(aliases)) throw invalidRequest('openaiAliases', 'not_an_array');
  if (aliases.length > MAX_OPENAI_ALIASES)
    throw invalidRequest('openaiAliases', 'too_many', `Invalid openaiAliases: at most ${MAX_OPENAI_ALIASES} names`);
  for (const name of aliases) {
    if (typeof name !== 'string' || !OPENAI_MODEL_NAME.test(name))
      throw invalidRequest('openaiAliases', 'bad_name', `Invalid openaiAliases: ${JSON.stringify(name)} is not an OpenAI model name`);
  }
  const names = aliases as string[];
  if (new Set(names).size !== names.length) throw invalidRequest('openaiAliases', 'duplicate');
  return names;
}

/**
 * Inside the caller's transaction: takes the alias lock, then refuses a name another model
 * answers to already, by alias or as its key (the door looks keys up first, so such an alias
 * would never be reached), and a new model's key that is some model's alias.
 */
export async function claimOpenAiNames(tx: EntityManager, model: Pick<ModelEntity, 'key' | 'openaiAliases'>): Promise<void> {
  await tx.query(`SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, [ALIAS_LOCK]);
  const clashes = await queryRows<{ key: string; name: string }>(
    tx,
    `SELECT key, name FROM models, unnest(openai_aliases || key) AS name
      WHERE key <> $1 AND name = ANY($2::text[])`,
    [model.key, [...model.openaiAliases, model.key]],
  );
  const clash = clashes[0];
  if (!clash) return;
  if (clash.name === model.key) throw invalidRequest('key', 'taken', `Invalid key: ${clash.name} is an OpenAI alias of model ${clash.key}`);
  throw invalidRequest('openaiAliases', 'taken', `Invalid openaiAliases: ${clash.name} already names model ${clash.key}`);
}
