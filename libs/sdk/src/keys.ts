import type { KilnHttp } from './http';
import type { ApiKey, CreatedKey, CreateKeyRequest, UpdateKeyRequest } from './types';

/**
 * The account's API keys (`/v1/dashboard/keys`): their budgets, models allowlists and
 * revocation. These routes take the holder's session (`sessionToken`, or `Kiln.login`), not
 * an API key: a key cannot widen its own limits.
 */
export class KeysResource {
  constructor(private readonly http: KilnHttp) {}

  /** Every key of the account, newest first, revoked ones included, each with its period's spend. */
  async list(): Promise<ApiKey[]> {
    return (await this.http.json<{ keys: ApiKey[] }>('GET', '/v1/dashboard/keys', { repeatable: true })).body.keys;
  }

  /**
   * Creates a key; `secret` is in this answer only. Not retried once it may have reached the
   * server: creating twice makes two keys, and a lost answer's secret cannot be read again
   * (revoke the unknown key from `list`).
   */
  async create(body: CreateKeyRequest): Promise<CreatedKey> {
    return (await this.http.json<CreatedKey>('POST', '/v1/dashboard/keys', { body })).body;
  }

  /**
   * Changes what is given: `name`, `budget` (`{ credits, period }`, null clears it), `models`
   * (`[]` allows every model), `creditCapPerDay` (a day budget's older spelling; not with
   * `budget`), `scopes`. Setting the same values twice is harmless, so it is retried.
   */
  async update(id: string, body: UpdateKeyRequest): Promise<ApiKey> {
    return (await this.http.json<{ key: ApiKey }>('PATCH', `/v1/dashboard/keys/${encodeURIComponent(id)}`, { body, repeatable: true })).body
      .key;
  }

  /** Revokes the key (idempotent): refused from its very next request. Answers it with `revokedAt`. */
  async revoke(id: string): Promise<ApiKey> {
    return (await this.http.json<{ key: ApiKey }>('DELETE', `/v1/dashboard/keys/${encodeURIComponent(id)}`, { repeatable: true })).body.key;
  }
}
