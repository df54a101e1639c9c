import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { bootTestApp, TestApp } from '@app/testing';

describe('API-key authentication (docs/api.md#authentication)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(() => t.close());

  const expectError = (res: { status: number; body: any }, status: number, code: string) => {
    expect(res.status).toBe(status);
    expect(res.body.error.code).toBe(code);
    expect(typeof res.body.error.message).toBe('string');
  };

  it('accepts a valid key', async () => {
    const a = await t.account();
    await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200);
  });

  it('missing header -> 401 unauthorized', async () => {
    expectError(await t.http.get('/v1/me'), 401, 'unauthorized');
  });

  it('non-bearer scheme -> 401 unauthorized', async () => {
    expectError(await t.http.get('/v1/me').set('Authorization', 'Basic abc'), 401, 'unauthorized');
  });

  it('malformed or unknown key -> 401 invalid_api_key', async () => {
    expectError(await t.http.get('/v1/me').set('Authorization', 'Bearer nope'), 401, 'invalid_api_key');
    const unknown = 'kiln_live_' + 'A'.repeat(32);
    expectError(await t.http.get('/v1/me').set('Authorization', `Bearer ${unknown}`), 401, 'invalid_api_key');
  });

  it('expired key -> 401 invalid_api_key', async () => {
    const a = await t.account();
    await t.db.query(`UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, [a.keyId]);
    expectError(await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`), 401, 'invalid_api_key');
  });

  it('a key expiring later is accepted, and its first use is recorded once', async () => {
    const a = await t.account();
    await t.db.query(`UPDATE api_keys SET expires_at = now() + interval '1 hour' WHERE id = $1`, [a.keyId]);
    await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200);
    const lastUsed = async (): Promise<Date | null> =>
      (await t.db.query(`SELECT last_used_at FROM api_keys WHERE id = $1`, [a.keyId]))[0].last_used_at;
    for (let i = 0; i < 50 && !(await lastUsed()); i++) await new Promise((r) => setTimeout(r, 20));
    const first = await lastUsed();
    expect(first).toBeInstanceOf(Date);
    await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200);
    expect(await lastUsed()).toEqual(first);
  });

  it('a revoked key is refused on the very next request -> 401 key_revoked', async () => {
    const a = await t.account();
    await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200);
    await t.db.query(`UPDATE api_keys SET revoked_at = now() WHERE id = $1`, [a.keyId]);
    expectError(await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`), 401, 'key_revoked');
  });

  it('a disabled account is refused on the next request -> 403 account_disabled', async () => {
    const a = await t.account();
    await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
    await t.admin('patch', `/v1/admin/accounts/${a.id}`).send({ status: 'disabled' }).expect(200);
    expectError(await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`), 403, 'account_disabled');
    await t.admin('patch', `/v1/admin/accounts/${a.id}`).send({ status: 'active' }).expect(200);
    await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
  });

  it('a plan without API access -> 403 api_not_available_on_plan', async () => {
    const a = await t.account({ plan: 'starter' });
    await t.admin('patch', `/v1/admin/accounts/${a.id}`).send({ plan: 'free' }).expect(200);
    expectError(await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`), 403, 'api_not_available_on_plan');
  });

  it('a key without the scope -> 403 insufficient_scope', async () => {
    const a = await t.account({ scopes: ['models:read'] });
    await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
    const res = await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`);
    expectError(res, 403, 'insufficient_scope');
    expect(res.body.error.details).toEqual({ required: 'account:read' });
  });

  it('stores only a SHA-256 of the key, never the key', async () => {
    const a = await t.account();
    const rows = await t.db.query(`SELECT key_hash, hint FROM api_keys WHERE id = $1`, [a.keyId]);
    expect(rows[0].key_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[0].hint).toBe(`kiln_live_${a.key.slice(10, 14)}...${a.key.slice(-4)}`);
    const dump = JSON.stringify(await t.db.query(`SELECT * FROM api_keys`));
    expect(dump).not.toContain(a.key.slice(10));
  });
});
