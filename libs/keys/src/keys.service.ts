import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, IsNull, Repository } from 'typeorm';
import {
  AccountEntity,
  AccountStatus,
  ApiKeyEntity,
  isUuid,
  PlanEntity,
  PlanKey,
  PreparedStatement,
  queryPrepared,
  queryRows,
} from '@app/database';
import { ErrorCode, invalidRequest, KilnError } from '@app/errors';
import { ALL_SCOPES, Scope } from './key-scopes';
import { generateKeySecret, KEY_PATTERN, keyHint, sha256Hex } from './key-secret';

/**
 * What a request authenticated by an API key knows about its key, account and plan: only
 * the columns the auth checks and the routes read, so the per-request lookup stays small.
 * A route that needs more of the account or plan loads it (see AccountsService.view).
 */
export interface AuthenticatedKey {
  key: Pick<
    ApiKeyEntity,
    | 'id'
    | 'accountId'
    | 'scopes'
    | 'creditCapPerDay'
    | 'budgetCredits'
    | 'budgetPeriod'
    | 'models'
    | 'lastUsedAt'
    | 'revokedAt'
    | 'expiresAt'
  >;
  account: Pick<AccountEntity, 'id' | 'status' | 'planKey'>;
  plan: Pick<PlanEntity, 'key' | 'apiAccess' | 'requestsPerMinute'>;
}

/** One row of AUTHENTICATE, as node-postgres parses it (timestamptz -> Date, text[] -> string[]). */
interface AuthRow {
  id: string;
  account_id: string;
  scopes: string[];
  credit_cap_per_day: number | null;
  budget_credits: number | null;
  budget_period: ApiKeyEntity['budgetPeriod'];
  models: string[];
  last_used_at: Date | null;
  revoked_at: Date | null;
  expires_at: Date | null;
  account_status: AccountStatus;
  plan_key: PlanKey;
  api_access: boolean;
  requests_per_minute: number;
}

/** Runs on every API request: a constant statement, prepared once per connection. */
const AUTHENTICATE: PreparedStatement = {
  name: 'kiln_authenticate_key',
  text: `SELECT k.id, k.account_id, k.scopes, k.credit_cap_per_day, k.budget_credits, k.budget_period, k.models, k.last_used_at, k.revoked_at, k.expires_at,
       a.status AS account_status, p.key AS plan_key, p.api_access, p.requests_per_minute
  FROM api_keys k
  JOIN accounts a ON a.id = k.account_id
  JOIN plans p ON p.key = a.plan_key
 WHERE k.key_hash = $1`,
};

/** A key's budget as written: credits per UTC calendar period (libs/billing key-budget.ts). */
export interface KeyBudgetInput {
  credits: number;
  period: 'day' | 'week' | 'month';
}

/** What a key's budget and allowlist may be set to, on creation and update alike. */
export interface KeyLimitsInput {
  /** v1's spelling of a day budget; setting it clears `budget`. */
  creditCapPerDay?: number | null;
  /** Setting it (or null) clears `creditCapPerDay`. */
  budget?: KeyBudgetInput | null;
  /** Model keys this key may use; empty: every model. */
  models?: string[];
}

export interface CreateKeyInput extends KeyLimitsInput {
  name?: string;
  scopes?: Scope[];
}

/**
 * Applies a budget written in either spelling: they are one budget, so one given clears the
 * other. Both in one request is refused (which one was meant is not knowable).
 */
function applyLimits(key: ApiKeyEntity, input: KeyLimitsInput): void {
  if (input.creditCapPerDay !== undefined && input.budget !== undefined) {
    throw invalidRequest('budget', 'conflicts_with_creditCapPerDay', 'Give budget or creditCapPerDay (its older spelling), not both');
  }
  if (input.creditCapPerDay !== undefined) {
    key.creditCapPerDay = input.creditCapPerDay;
    key.budgetCredits = null;
    key.budgetPeriod = null;
  }
  if (input.budget !== undefined) {
    key.creditCapPerDay = null;
    key.budgetCredits = input.budget?.credits ?? null;
    key.budgetPeriod = input.budget?.period ?? null;
  }
  if (input.models !== undefined) key.models = [...new Set(input.models)];
}

/**
 * Refuses an allowlist naming a model the catalog does not have (disabled ones are known): a
 * misspelt name would otherwise make a key that silently may use nothing it was meant for.
 */
async function requireKnownModels(db: Pick<DataSource, 'query'>, models: readonly string[] | undefined): Promise<void> {
  if (!models?.length) return;
  const named = [...new Set(models)];
  const rows = await queryRows<{ key: string }>(db, `SELECT key FROM models WHERE key = ANY($1::text[])`, [named]);
  const known = new Set(rows.map((r) => r.key));
  const unknown = named.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new KilnError(ErrorCode.InvalidRequest, `Unknown model${unknown.length > 1 ? 's' : ''} in models: ${unknown.join(', ')}`, {
      field: 'models',
      reason: 'unknown_model',
      unknown,
    });
  }
}

/**
 * Refuses a model the key's allowlist does not name (an empty list allows every model). The
 * list is the key's as its request authenticated (read fresh per request): an edit that
 * commits after that applies from the next request.
 */
export function requireModelAllowed(allowed: readonly string[], modelKey: string): void {
  if (allowed.length > 0 && !allowed.includes(modelKey)) {
    throw new KilnError(ErrorCode.ModelNotAllowed, `This API key may not use ${modelKey}`, { model: modelKey, allowed: [...allowed] });
  }
}

/** The key's budget columns without a lock (an estimate reserves nothing). */
export async function readKeyBudget(
  m: Pick<EntityManager, 'query'>,
  apiKeyId: string,
): Promise<Pick<ApiKeyEntity, 'creditCapPerDay' | 'budgetCredits' | 'budgetPeriod'>> {
  const [row] = await queryRows<{
    credit_cap_per_day: number | null;
    budget_credits: number | null;
    budget_period: ApiKeyEntity['budgetPeriod'];
  }>(m, `SELECT credit_cap_per_day, budget_credits, budget_period FROM api_keys WHERE id = $1`, [apiKeyId]);
  return {
    creditCapPerDay: row?.credit_cap_per_day ?? null,
    budgetCredits: row?.budget_credits ?? null,
    budgetPeriod: row?.budget_period ?? null,
  };
}

/** lastUsedAt is written at most this often per key, not on every request. */
const LAST_USED_RESOLUTION_MS = 60_000;

@Injectable()
export class KeysService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    @InjectRepository(ApiKeyEntity) private readonly keys: Repository<ApiKeyEntity>,
  ) {}

  /**
   * Creates a key and returns its secret, the only time it exists outside the caller.
   * The plan's key count is checked under a lock on the account row, so two concurrent
   * creations cannot both take the last slot.
   */
  async create(accountId: string, input: CreateKeyInput): Promise<{ key: ApiKeyEntity; secret: string }> {
    return this.db.transaction(async (m) => {
      const [row] = await queryRows<{ max_keys: number }>(
        m,
        `SELECT p.max_keys FROM accounts a JOIN plans p ON p.key = a.plan_key WHERE a.id = $1 FOR UPDATE OF a`,
        [accountId],
      );
      if (!row) throw new KilnError(ErrorCode.NotFound, 'Account not found');
      const [{ count }] = await queryRows<{ count: number }>(
        m,
        `SELECT count(*)::int AS count FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL`,
        [accountId],
      );
      if (count >= row.max_keys) {
        throw new KilnError(ErrorCode.KeyLimitExceeded, 'Your plan does not allow more API keys', {
          active: count,
          max: row.max_keys,
        });
      }
      const secret = generateKeySecret();
      const key = m.create(ApiKeyEntity, {
        accountId,
        name: input.name?.trim() || 'API key',
        keyHash: sha256Hex(secret),
        hint: keyHint(secret),
        scopes: input.scopes ?? [...ALL_SCOPES],
        creditCapPerDay: null,
        budgetCredits: null,
        budgetPeriod: null,
        models: [],
        lastUsedAt: null,
        revokedAt: null,
        expiresAt: null,
      });
      await requireKnownModels(m, input.models);
      applyLimits(key, input);
      await m.save(key);
      return { key, secret };
    });
  }

  /**
   * Resolves a bearer token to its key, account and plan with one indexed query and no
   * cache, so a revocation or a disabled account is refused on the very next request on
   * every replica.
   */
  async authenticate(token: string): Promise<AuthenticatedKey> {
    if (!KEY_PATTERN.test(token)) throw new KilnError(ErrorCode.InvalidApiKey, 'API key not recognised');
    const rows = await queryPrepared<AuthRow>(this.db, AUTHENTICATE, [sha256Hex(token)]);
    const row = rows[0];
    if (!row) throw new KilnError(ErrorCode.InvalidApiKey, 'API key not recognised');
    if (row.revoked_at) throw new KilnError(ErrorCode.KeyRevoked, 'This API key has been revoked');
    if (row.expires_at && row.expires_at.getTime() <= Date.now()) {
      throw new KilnError(ErrorCode.InvalidApiKey, 'This API key has expired');
    }
    if (row.account_status !== 'active') throw new KilnError(ErrorCode.AccountDisabled, 'This account is disabled');
    if (!row.api_access) {
      throw new KilnError(ErrorCode.ApiNotAvailableOnPlan, `The ${row.plan_key} plan does not include API access`);
    }
    const key: AuthenticatedKey['key'] = {
      id: row.id,
      accountId: row.account_id,
      scopes: row.scopes,
      creditCapPerDay: row.credit_cap_per_day,
      budgetCredits: row.budget_credits,
      budgetPeriod: row.budget_period,
      models: row.models,
      lastUsedAt: row.last_used_at,
      revokedAt: row.revoked_at,
      expiresAt: row.expires_at,
    };
    this.touch(key);
    return {
      key,
      account: { id: row.account_id, status: row.account_status, planKey: row.plan_key },
      plan: { key: row.plan_key, apiAccess: row.api_access, requestsPerMinute: row.requests_per_minute },
    };
  }

  async list(accountId: string): Promise<ApiKeyEntity[]> {
    return this.keys.find({ where: { accountId }, order: { createdAt: 'DESC', id: 'DESC' } });
  }

  async get(accountId: string, keyId: string): Promise<ApiKeyEntity> {
    const key = await this.findOwned(accountId, keyId);
    if (!key) throw new KilnError(ErrorCode.NotFound, 'API key not found');
    return key;
  }

  async update(accountId: string, keyId: string, patch: KeyLimitsInput & { name?: string; scopes?: Scope[] }): Promise<ApiKeyEntity> {
    const key = await this.get(accountId, keyId);
    if (patch.name !== undefined) key.name = patch.name.trim() || key.name;
    await requireKnownModels(this.db, patch.models);
    applyLimits(key, patch);
    if (patch.scopes !== undefined) key.scopes = patch.scopes;
    return this.keys.save(key);
  }

  async revoke(accountId: string, keyId: string): Promise<ApiKeyEntity> {
    const key = await this.get(accountId, keyId);
    if (!key.revokedAt) {
      await this.keys.update({ id: key.id, revokedAt: IsNull() }, { revokedAt: () => 'now()' });
    }
    return this.get(accountId, keyId);
  }

  /**
   * Operators' lookup (support): a key by id, or every key whose hint is the one given
   * (`kiln_live_abcd...wxyz`, as the holder sees it; hints are not unique). Any account's.
   */
  async findByIdOrHint(idOrHint: string): Promise<ApiKeyEntity[]> {
    const given = idOrHint.trim();
    const where = isUuid(given) ? { id: given } : { hint: given };
    return this.keys.find({ where, order: { createdAt: 'DESC', id: 'DESC' }, take: 50 });
  }

  /** Revokes any account's key (operators); revoking twice keeps the first time. */
  async revokeById(keyId: string): Promise<ApiKeyEntity> {
    const [key] = await this.findByIdOrHint(keyId);
    if (!key || !isUuid(keyId)) throw new KilnError(ErrorCode.NotFound, 'API key not found');
    return this.revoke(key.accountId, key.id);
  }

  private async findOwned(accountId: string, keyId: string): Promise<ApiKeyEntity | null> {
    if (!isUuid(keyId)) return null;
    return this.keys.findOne({ where: { id: keyId, accountId } });
  }

  /** Fire-and-forget, at most once a minute per key: a lost write only blurs lastUsedAt. */
  private touch(key: Pick<ApiKeyEntity, 'id' | 'lastUsedAt'>): void {
    const last = key.lastUsedAt?.getTime() ?? 0;
    if (Date.now() - last < LAST_USED_RESOLUTION_MS) return;
    key.lastUsedAt = new Date();
    void this.db
      .query(
        `UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`,
        [key.id],
      )
      .catch(() => undefined);
  }
}
