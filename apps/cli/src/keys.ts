import { ApiKey, Kiln, KilnApiError, UpdateKeyRequest } from '@app/sdk';
import { UsageError } from './cli.errors';

/*
 * `kiln keys`: the account's API keys, their budgets and models allowlists (docs/cli.md#kiln-keys).
 * Values are checked by Kiln, not here (a bad period answers invalid_request, exit 3), except
 * what the flags themselves cannot mean.
 */

/** The flags of `keys create` and `keys update`, as commander parses them. */
export interface KeyFlags {
  name?: string;
  /** Credits of the budget; false: `--no-budget` (clear it). */
  budget?: number | false;
  period?: string;
  /** Comma-separated model keys. */
  models?: string;
  allModels?: boolean;
  /** A day budget in v1's spelling; false: `--no-cap`. */
  cap?: number | false;
  scopes?: string[];
}

/** The request body the flags say; only what was given, so an update changes nothing else. */
export function keyBody(flags: KeyFlags): UpdateKeyRequest {
  const body: UpdateKeyRequest = {};
  if (flags.name !== undefined) body.name = flags.name;
  if (flags.budget === false) {
    if (flags.period !== undefined) throw new UsageError('--period goes with --budget, not --no-budget');
    body.budget = null;
  } else if (flags.budget !== undefined) {
    if (flags.period === undefined) throw new UsageError('--budget needs --period (day, week or month)');
    // The period is Kiln's to check: its refusal names the allowed values.
    body.budget = { credits: flags.budget, period: flags.period as NonNullable<UpdateKeyRequest['budget']>['period'] };
  } else if (flags.period !== undefined) {
    throw new UsageError('--period needs --budget <credits>');
  }
  if (flags.allModels && flags.models !== undefined) throw new UsageError('give --models or --all-models, not both');
  if (flags.allModels) body.models = [];
  else if (flags.models !== undefined) {
    const models = flags.models
      .split(',')
      .map((m) => m.trim())
      .filter(Boolean);
    if (models.length === 0) throw new UsageError('--models needs at least one model key (--all-models allows every model)');
    body.models = models;
  }
  if (flags.cap === false) body.creditCapPerDay = null;
  else if (flags.cap !== undefined) body.creditCapPerDay = flags.cap;
  if (flags.scopes !== undefined) body.scopes = flags.scopes as UpdateKeyRequest['scopes'];
  return body;
}

/** "18/20 a week": spent of the budget in its period; "-" without one. */
export function budgetText(key: ApiKey): string {
  return key.budget ? `${key.budget.spent}/${key.budget.credits} a ${key.budget.period}` : '-';
}

const modelsText = (key: ApiKey) => (key.models.length ? key.models.join(',') : 'all');
const statusText = (key: ApiKey) => (key.revokedAt === null ? 'active' : `revoked ${new Date(key.revokedAt).toISOString()}`);

/** One key, as `create`, `update` and `revoke` print it. */
export function keyLine(key: ApiKey): string {
  return `${key.id}  ${key.name}  ${key.hint}  budget ${budgetText(key)}  models ${modelsText(key)}  ${statusText(key)}`;
}

/** The keys as a table, newest first (as listed). */
export function keyTable(keys: ApiKey[]): string {
  if (keys.length === 0) return 'no keys';
  const rows = [
    ['id', 'name', 'key', 'budget (spent/credits)', 'models', 'last used', 'status'],
    ...keys.map((k) => [
      k.id,
      k.name,
      k.hint,
      budgetText(k),
      modelsText(k),
      k.lastUsedAt === null ? '-' : new Date(k.lastUsedAt).toISOString(),
      statusText(k),
    ]),
  ];
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')).join('\n');
}

const FULL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PREFIX = /^[0-9a-f][0-9a-f-]{3,35}$/i;

/** A key id from what was typed: whole, or the start (4 characters or more) of one key's id. */
export async function keyId(kiln: Kiln, given: string): Promise<string> {
  if (FULL_ID.test(given)) return given;
  if (!PREFIX.test(given)) throw new UsageError(`${given} is not a key id or the start of one (at least 4 of its characters)`);
  const matches = (await kiln.keys.list()).filter((k) => k.id.startsWith(given.toLowerCase())).map((k) => k.id);
  if (matches.length > 1) throw new UsageError(`${given} is the start of more than one key (${matches.join(', ')}): give more of the id`);
  if (matches.length === 0)
    throw new KilnApiError('not_found', `No key of this account has an id starting with ${given}`, 404, undefined, undefined);
  return matches[0];
}
