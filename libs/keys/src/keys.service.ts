import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, EntityManager, IsNull, Repository } from 'typeorm';
import { AccountEntity, AccountStatus, ApiKeyEntity, isUuid, PlanEntity, PlanKey, PreparedStatement, queryPrepared } from '@app/database';
import { ErrorCode, KilnError } from '@app/errors';
import { ALL_SCOPES, Scope } from './key-scopes';
import { generateKeySecret, KEY_PATTERN, keyHint, sha256Hex } from './key-secret';

/**
 * What a request authenticated by an API key knows about its key, account and plan: only
 * the columns the auth checks and the routes read, so the per-request lookup stays small.
 * A route that needs more of the account or plan loads it (see AccountsService.view).
 */
export interface AuthenticatedKey {
  key: Pick<ApiKeyEntity, 'id' | 'accountId' | 'scopes' | 'creditCapPerDay' | 'lastUsedAt' | 'revokedAt' | 'expiresAt'>;
  account: Pick<AccountEntity, 'id' | 'status' | 'planKey'>;
  plan: Pick<PlanEntity, 'key' | 'apiAccess' | 'requestsPerMinute'>;
}

/** One row of AUTHENTICATE, as node-postgres parses it (timestamptz -> Date, text[] -> string[]). */
interface AuthRow {
  id: string;
  account_id: string;
  scopes: string[];
  credit_cap_per_day: number | null;
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
  text: `SELECT k.id, k.account_id, k.scopes, k.credit_cap_per_day, k.last_used_at, k.revoked_at, k.expires_at,
       a.status AS account_status, p.key AS plan_key, p.api_access, p.requests_per_minute
  FROM api_keys k
  JOIN accounts a ON a.id = k.account_id
  JOIN plans p ON p.key = a.plan_key
 WHERE k.key_hash = $1`,
};

export interface CreateKeyInput {
  name?: string;
  scopes?: Scope[];
  creditCapPerDay?: number | null;
}

/** The key's daily cap without a lock (an estimate reserves nothing). */
export async function readKeyCreditCap(m: Pick<EntityManager, 'query'>, apiKeyId: string): Promise<number | null> {
  const [row] = await m.query(`SELECT credit_cap_per_day FROM api_keys WHERE id = $1`, [apiKeyId]);
  return row?.credit_cap_per_day ?? null;
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
      const [row] = await m.query(
        `SELECT p.max_keys FROM accounts a JOIN plans p ON p.key = a.plan_key WHERE a.id = $1 FOR UPDATE OF a`,
        [accountId],
      );
      if (!row) throw new KilnError(ErrorCode.NotFound, 'Account not found');
      const [{ count }] = await m.query(
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
        creditCapPerDay: input.creditCapPerDay ?? null,
        lastUsedAt: null,
        revokedAt: null,
        expiresAt: null,
      });
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

  async update(
    accountId: string,
    keyId: string,
    patch: { name?: string; creditCapPerDay?: number | null; scopes?: Scope[] },
  ): Promise<ApiKeyEntity> {
    const key = await this.get(accountId, keyId);
    if (patch.name !== undefined) key.name = patch.name.trim() || key.name;
    if (patch.creditCapPerDay !== undefined) key.creditCapPerDay = patch.creditCapPerDay;
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
