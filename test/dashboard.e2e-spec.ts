import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { DASHBOARD_AUTH_LIMITS, DashboardAuthLimits } from '../apps/api/src/dashboard/login-throttle.service';
import { BillingService } from '@app/billing';
import { buildConfig, KILN_CONFIG } from '@app/config';
import { KEY_PATTERN } from '@app/keys';
import { newObjectToken, resultObjectKey, StorageDriver } from '@app/storage';
import { bootTestApp, solidPng, TestApp } from '@app/testing';

const PASSWORD = 'correct horse battery';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const email = () => `d-${randomUUID()}@example.test`;
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/**
 * The real ApiModule and configureApp with two changes: the signup/login limits (every test
 * request comes from 127.0.0.1) and a Redis prefix of its own, so rate-limit counters and
 * queued tasks never mix with another file's (no generator consumes this app's batches).
 */
async function bootDashboardApp(limits: DashboardAuthLimits, env: Record<string, string> = {}): Promise<TestApp> {
  const config = { ...buildConfig({ ...process.env, ...env }) };
  config.redisPrefix = `${config.redisPrefix}:dashboard-${randomBytes(4).toString('hex')}`;
  return bootTestApp(ApiModule, configureApp, [
    [KILN_CONFIG, config],
    [DASHBOARD_AUTH_LIMITS, limits],
  ]);
}

const expectError = (res: { status: number; body: any }, status: number, code: string) => {
  expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status, code });
  expect(typeof res.body.error.message).toBe('string');
};

describe('Dashboard API (docs/dashboard.md)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootDashboardApp({
      loginPerIp: 1000,
      loginFailuresPerEmailAndIp: 1000,
      loginFailuresPerEmailPerHour: 1000,
      signupPerIp: 1000,
    });
  });
  afterAll(() => t.close());

  /** A fresh account holder, signed up through the dashboard. */
  async function holder(opts: { plan?: string; credits?: number } = {}) {
    const address = email();
    const res = await t.http.post('/v1/dashboard/signup').send({ email: address, password: PASSWORD }).expect(201);
    const account = await t.http.get('/v1/dashboard/account').set(bearer(res.body.token)).expect(200);
    const id = account.body.account.id as string;
    if (opts.plan) await t.admin('patch', `/v1/admin/accounts/${id}`).send({ plan: opts.plan }).expect(200);
    if (opts.credits) {
      await t.admin('post', `/v1/admin/accounts/${id}/credits`).send({ amount: opts.credits, reason: 'test grant' }).expect(200);
    }
    return { id, email: address, token: res.body.token as string };
  }

  const dash = (method: 'get' | 'post' | 'patch' | 'delete', path: string, token: string) =>
    t.http[method](`/v1/dashboard${path}`).set(bearer(token));

  describe('signup, login and logout', () => {
    it('signup creates a free account with a zero balance and returns a session', async () => {
      const address = email();
      const before = Date.now();
      const res = await t.http.post('/v1/dashboard/signup').send({ email: address, password: PASSWORD }).expect(201);
      expect(Object.keys(res.body).sort()).toEqual(['expiresAt', 'token']);
      expect(res.body.token).toMatch(/^kiln_sess_[A-Za-z0-9_-]{43}$/);
      expect(res.body.expiresAt).toBeGreaterThanOrEqual(before + 7 * 86_400_000 - 1000);
      expect(res.body.expiresAt).toBeLessThanOrEqual(Date.now() + 7 * 86_400_000 + 1000);

      const acc = await dash('get', '/account', res.body.token).expect(200);
      expect(acc.body).toEqual({
        account: {
          id: expect.any(String),
          email: address,
          plan: 'free',
          status: 'active',
          balance: 0,
          createdAt: expect.any(Number),
          lowCreditsThreshold: null,
        },
        limits: {
          maxImagesPerBatch: 4,
          maxConcurrentBatches: 1,
          activeBatches: 0,
          maxConcurrentEconomyBatches: 0,
          activeEconomyBatches: 0,
          maxKeys: 0,
          apiAccess: false,
          requestsPerMinute: 60,
        },
        purchasesEnabled: false,
      });

      // Only a SHA-256 of the token and a scrypt hash of the password are stored.
      const sessions = await t.db.query(`SELECT * FROM sessions WHERE account_id = $1`, [acc.body.account.id]);
      expect(sessions).toHaveLength(1);
      expect(sessions[0].token_hash).toBe(sha256(res.body.token));
      expect(JSON.stringify(sessions)).not.toContain(res.body.token.slice(10));
      const [row] = await t.db.query(`SELECT password_hash FROM accounts WHERE id = $1`, [acc.body.account.id]);
      expect(row.password_hash).toMatch(/^scrypt\$/);
      expect(row.password_hash).not.toContain(PASSWORD);
    });

    it('a duplicate email, in any case -> 409 email_taken', async () => {
      const address = email();
      await t.http.post('/v1/dashboard/signup').send({ email: address, password: PASSWORD }).expect(201);
      const res = await t.http.post('/v1/dashboard/signup').send({ email: address.toUpperCase(), password: PASSWORD });
      expectError(res, 409, 'email_taken');
      expect(res.body.error.details).toEqual({ field: 'email' });
    });

    it.each([
      ['a short password', { email: 'x@example.test', password: '123456789' }, 'password'],
      ['an over-long password', { email: 'x@example.test', password: 'x'.repeat(201) }, 'password'],
      ['a non-string password', { email: 'x@example.test', password: 1234567890123 }, 'password'],
      ['a missing password', { email: 'x@example.test' }, 'password'],
      ['a malformed email', { email: 'not-an-email', password: PASSWORD }, 'email'],
      ['a missing email', { password: PASSWORD }, 'email'],
      ['an unknown field', { email: 'x@example.test', password: PASSWORD, plan: 'scale' }, 'plan'],
    ])('signup with %s -> 400 invalid_request', async (_, body, field) => {
      const res = await t.http.post('/v1/dashboard/signup').send(body);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.details.field).toBe(field);
    });

    it('malformed JSON and non-object bodies -> 400 invalid_request', async () => {
      for (const path of ['/v1/dashboard/signup', '/v1/dashboard/login']) {
        expectError(await t.http.post(path).set('Content-Type', 'application/json').send('{"email":'), 400, 'invalid_request');
        expectError(await t.http.post(path).set('Content-Type', 'application/json').send('[1,2]'), 400, 'invalid_request');
        expectError(await t.http.post(path).send({}), 400, 'invalid_request');
      }
    });

    it('login returns a new session; the email compares case-insensitively', async () => {
      const h = await holder();
      const res = await t.http.post('/v1/dashboard/login').send({ email: h.email.toUpperCase(), password: PASSWORD }).expect(200);
      expect(res.body.token).toMatch(/^kiln_sess_/);
      expect(res.body.token).not.toBe(h.token);
      const acc = await dash('get', '/account', res.body.token).expect(200);
      expect(acc.body.account.id).toBe(h.id);
    });

    it('wrong password and unknown email get the same 401 invalid_credentials', async () => {
      const h = await holder();
      const wrong = await t.http.post('/v1/dashboard/login').send({ email: h.email, password: PASSWORD + '!' });
      const unknown = await t.http.post('/v1/dashboard/login').send({ email: email(), password: PASSWORD });
      expectError(wrong, 401, 'invalid_credentials');
      expectError(unknown, 401, 'invalid_credentials');
      expect(wrong.body).toEqual(unknown.body);
    });

    it('an account created by an operator without a password cannot sign in', async () => {
      const address = email();
      await t.admin('post', '/v1/admin/accounts').send({ email: address, plan: 'starter' }).expect(201);
      expectError(await t.http.post('/v1/dashboard/login').send({ email: address, password: PASSWORD }), 401, 'invalid_credentials');
    });

    it('a disabled account: login -> 403 account_disabled, sessions refused on the next request', async () => {
      const h = await holder();
      await t.admin('patch', `/v1/admin/accounts/${h.id}`).send({ status: 'disabled' }).expect(200);
      expectError(await t.http.post('/v1/dashboard/login').send({ email: h.email, password: PASSWORD }), 403, 'account_disabled');
      // A wrong password still says nothing about the account.
      expectError(
        await t.http.post('/v1/dashboard/login').send({ email: h.email, password: 'wrong password!' }),
        401,
        'invalid_credentials',
      );
      expectError(await dash('get', '/account', h.token), 403, 'account_disabled');
      await t.admin('patch', `/v1/admin/accounts/${h.id}`).send({ status: 'active' }).expect(200);
      await dash('get', '/account', h.token).expect(200);
    });

    it('no token -> 401 unauthorized; an unknown token -> 401 invalid_credentials', async () => {
      expectError(await t.http.get('/v1/dashboard/account'), 401, 'unauthorized');
      expectError(await t.http.get('/v1/dashboard/account').set('Authorization', 'Basic abc'), 401, 'unauthorized');
      expectError(await t.http.get('/v1/dashboard/account').set(bearer('nope')), 401, 'invalid_credentials');
      const forged = 'kiln_sess_' + 'A'.repeat(43);
      expectError(await t.http.get('/v1/dashboard/account').set(bearer(forged)), 401, 'invalid_credentials');
    });

    it('an expired session -> 401 invalid_credentials', async () => {
      const h = await holder();
      await t.db.query(`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE token_hash = $1`, [sha256(h.token)]);
      const res = await dash('get', '/account', h.token);
      expectError(res, 401, 'invalid_credentials');
      expect(res.body.error.details).toEqual({ reason: 'expired' });
    });

    it('logout -> 204; that session is refused from the next request, other sessions live on', async () => {
      const h = await holder();
      const other = await t.http.post('/v1/dashboard/login').send({ email: h.email, password: PASSWORD }).expect(200);
      const res = await dash('post', '/logout', h.token).expect(204);
      expect(res.text).toBe('');
      expectError(await dash('get', '/account', h.token), 401, 'invalid_credentials');
      expectError(await dash('post', '/logout', h.token), 401, 'invalid_credentials');
      expectError(await dash('get', '/keys', h.token), 401, 'invalid_credentials');
      await dash('get', '/account', other.body.token).expect(200);
      expectError(await t.http.post('/v1/dashboard/logout'), 401, 'unauthorized');
    });

    it('session tokens are not API keys, and API keys are not session tokens', async () => {
      const h = await holder({ plan: 'starter' });
      const created = await dash('post', '/keys', h.token).send({ name: 'ci' }).expect(201);
      expectError(await t.http.get('/v1/me').set(bearer(h.token)), 401, 'invalid_api_key');
      expectError(await t.http.get('/v1/dashboard/account').set(bearer(created.body.secret)), 401, 'invalid_credentials');
      await t.http.get('/v1/me').set(bearer(created.body.secret)).expect(200);
    });
  });

  describe('keys', () => {
    it('a free account cannot create keys -> 403 key_limit_exceeded', async () => {
      const h = await holder();
      const res = await dash('post', '/keys', h.token).send({ name: 'first' });
      expectError(res, 403, 'key_limit_exceeded');
      expect(res.body.error.details).toEqual({ active: 0, max: 0 });
    });

    it('create -> the secret works once an operator moves the account to a paid plan; it is shown only at creation and never stored', async () => {
      const h = await holder();
      await t.admin('patch', `/v1/admin/accounts/${h.id}`).send({ plan: 'starter' }).expect(200);
      const created = await dash('post', '/keys', h.token).send({ name: 'production' }).expect(201);
      const secret: string = created.body.secret;
      expect(secret).toMatch(KEY_PATTERN);
      expect(created.body.key).toEqual({
        id: expect.any(String),
        name: 'production',
        hint: `kiln_live_${secret.slice(10, 14)}...${secret.slice(-4)}`,
        scopes: ['models:read', 'account:read', 'batches:read', 'batches:write', 'uploads:write', 'webhooks:manage'],
        creditCapPerDay: null,
        creditsUsedToday: 0,
        capResetsAt: expect.any(Number),
        budget: null,
        models: [],
        createdAt: expect.any(Number),
        lastUsedAt: null,
        revokedAt: null,
      });

      const me = await t.http.get('/v1/me').set(bearer(secret)).expect(200);
      expect(me.body.user.id).toBe(h.id);
      expect(me.body.key.id).toBe(created.body.key.id);

      const body = secret.slice(10);
      const responses = [
        await dash('get', '/keys', h.token).expect(200),
        await dash('patch', `/keys/${created.body.key.id}`, h.token).send({ name: 'renamed' }).expect(200),
        await dash('get', '/account', h.token).expect(200),
        await dash('get', '/ledger', h.token).expect(200),
        await dash('delete', `/keys/${created.body.key.id}`, h.token).expect(200),
        await dash('get', '/keys', h.token).expect(200),
      ];
      for (const r of responses) expect(r.text).not.toContain(body);
      const dump = JSON.stringify(await t.db.query(`SELECT * FROM api_keys`));
      expect(dump).not.toContain(body);
      expect(dump).toContain(sha256(secret));
    });

    it('list, rename, restrict scopes and set or clear the daily cap; /v1/me sees the cap', async () => {
      const h = await holder({ plan: 'studio' });
      const a = await dash('post', '/keys', h.token).send({ name: 'a', creditCapPerDay: 50 }).expect(201);
      const b = await dash('post', '/keys', h.token)
        .send({ name: 'b', scopes: ['models:read', 'account:read'] })
        .expect(201);
      expect(b.body.key.scopes).toEqual(['models:read', 'account:read']);

      const list = await dash('get', '/keys', h.token).expect(200);
      expect(list.body.keys.map((k: any) => k.name)).toEqual(['b', 'a']);
      expect(list.body.keys.every((k: any) => k.creditsUsedToday === 0 && !('secret' in k))).toBe(true);

      let me = await t.http.get('/v1/me').set(bearer(a.body.secret)).expect(200);
      expect(me.body.key.creditCapPerDay).toBe(50);

      const patched = await dash('patch', `/keys/${a.body.key.id}`, h.token).send({ name: 'renamed', creditCapPerDay: 75 }).expect(200);
      expect(patched.body.key).toMatchObject({ id: a.body.key.id, name: 'renamed', creditCapPerDay: 75 });
      me = await t.http.get('/v1/me').set(bearer(a.body.secret)).expect(200);
      expect(me.body.key.creditCapPerDay).toBe(75);

      await dash('patch', `/keys/${a.body.key.id}`, h.token).send({ creditCapPerDay: null }).expect(200);
      me = await t.http.get('/v1/me').set(bearer(a.body.secret)).expect(200);
      expect(me.body.key.creditCapPerDay).toBeNull();

      await dash('patch', `/keys/${a.body.key.id}`, h.token)
        .send({ scopes: ['models:read'] })
        .expect(200);
      expectError(await t.http.get('/v1/me').set(bearer(a.body.secret)), 403, 'insufficient_scope');
      await t.http.get('/v1/models').set(bearer(a.body.secret)).expect(200);
    });

    it('a budget per day, week or month and a models allowlist: set on creation, changed and cleared by PATCH, listed with the spend', async () => {
      const h = await holder({ plan: 'studio', credits: 100 });
      const k = await dash('post', '/keys', h.token)
        .send({ name: 'budgeted', budget: { credits: 9, period: 'week' }, models: ['eta-image'] })
        .expect(201);
      expect(k.body.key).toMatchObject({ creditCapPerDay: null, budget: { credits: 9, period: 'week', spent: 0 }, models: ['eta-image'] });
      await t.http
        .post('/v1/batches')
        .set(bearer(k.body.secret))
        .send({ prompts: ['a', 'b'], model: 'eta-image' })
        .expect(201);
      const list = await dash('get', '/keys', h.token).expect(200);
      expect(list.body.keys[0]).toMatchObject({ budget: { credits: 9, period: 'week', spent: 2 } });

      let patched = await dash('patch', `/keys/${k.body.key.id}`, h.token)
        .send({ budget: { credits: 5, period: 'month' }, models: [] })
        .expect(200);
      expect(patched.body.key).toMatchObject({ budget: { credits: 5, period: 'month', spent: 2 }, models: [] });
      patched = await dash('patch', `/keys/${k.body.key.id}`, h.token).send({ creditCapPerDay: 4 }).expect(200);
      expect(patched.body.key).toMatchObject({ creditCapPerDay: 4, budget: { credits: 4, period: 'day', spent: 2 } });
      patched = await dash('patch', `/keys/${k.body.key.id}`, h.token).send({ budget: null }).expect(200);
      expect(patched.body.key).toMatchObject({ creditCapPerDay: null, budget: null });
      const both = await dash('patch', `/keys/${k.body.key.id}`, h.token).send({ creditCapPerDay: 4, budget: null });
      expectError(both, 400, 'invalid_request');
    });

    it.each([
      ['POST', { scopes: ['models:read'] }, 'name'],
      ['POST', { name: '   ' }, 'name'],
      ['POST', { name: 'x'.repeat(101) }, 'name'],
      ['POST', { name: 'k', scopes: ['admin'] }, 'scopes'],
      ['POST', { name: 'k', creditCapPerDay: 0 }, 'creditCapPerDay'],
      ['POST', { name: 'k', creditCapPerDay: 1.5 }, 'creditCapPerDay'],
      ['POST', { name: 'k', secret: 'mine' }, 'secret'],
      ['PATCH', { creditCapPerDay: -1 }, 'creditCapPerDay'],
      ['PATCH', { name: '' }, 'name'],
      ['PATCH', { revokedAt: null }, 'revokedAt'],
      ['POST', { name: 'k', models: ['eta-image', 'eta-imgae'] }, 'models'],
      ['PATCH', { models: ['eta-imgae'] }, 'models'],
    ])('%s /keys with %j -> 400 invalid_request', async (method, body, field) => {
      const h = await holder({ plan: 'starter' });
      const key = await dash('post', '/keys', h.token).send({ name: 'k' }).expect(201);
      const res =
        method === 'POST'
          ? await dash('post', '/keys', h.token).send(body)
          : await dash('patch', `/keys/${key.body.key.id}`, h.token).send(body);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.details.field).toBe(field);
    });

    it('revoke: refused on the very next request with key_revoked; idempotent', async () => {
      const h = await holder({ plan: 'starter' });
      const k = await dash('post', '/keys', h.token).send({ name: 'soon gone' }).expect(201);
      await t.http.get('/v1/me').set(bearer(k.body.secret)).expect(200);
      const revoked = await dash('delete', `/keys/${k.body.key.id}`, h.token).expect(200);
      expect(revoked.body.key.revokedAt).toEqual(expect.any(Number));
      expectError(await t.http.get('/v1/me').set(bearer(k.body.secret)), 401, 'key_revoked');
      const again = await dash('delete', `/keys/${k.body.key.id}`, h.token).expect(200);
      expect(again.body.key.revokedAt).toBe(revoked.body.key.revokedAt);
      const list = await dash('get', '/keys', h.token).expect(200);
      expect(list.body.keys).toEqual([expect.objectContaining({ id: k.body.key.id, revokedAt: revoked.body.key.revokedAt })]);
    });

    it('the plan key limit (starter: 2); revoked keys do not count', async () => {
      const h = await holder({ plan: 'starter' });
      const first = await dash('post', '/keys', h.token).send({ name: '1' }).expect(201);
      await dash('post', '/keys', h.token).send({ name: '2' }).expect(201);
      const res = await dash('post', '/keys', h.token).send({ name: '3' });
      expectError(res, 403, 'key_limit_exceeded');
      expect(res.body.error.details).toEqual({ active: 2, max: 2 });
      await dash('delete', `/keys/${first.body.key.id}`, h.token).expect(200);
      await dash('post', '/keys', h.token).send({ name: '3' }).expect(201);
    });
  });

  describe('usage and ledger', () => {
    /** A charge through a key (as POST /batches makes) and a refund of one task, via BillingService. */
    async function chargeAndRefund(accountId: string, keyId: string | null, charge: number, refund: number) {
      const billing = t.app.get(BillingService);
      const batchId = randomUUID();
      await t.db.transaction((m) => billing.chargeBatch(m, { accountId, batchId, apiKeyId: keyId, amount: charge }));
      if (refund > 0) {
        await t.db.transaction((m) =>
          billing.refundTask(m, {
            accountId,
            batchId,
            taskId: randomUUID(),
            amount: refund,
          }),
        );
      }
      return batchId;
    }

    it('ledger and usage sums agree with the balance after grants, charges and refunds', async () => {
      const h = await holder({ plan: 'starter', credits: 500 });
      await t.admin('post', `/v1/admin/accounts/${h.id}/credits`).send({ amount: -30, reason: 'correction' }).expect(200);
      const k = await dash('post', '/keys', h.token).send({ name: 'k' }).expect(201);
      const keyed = await chargeAndRefund(h.id, k.body.key.id, 40, 10);
      await chargeAndRefund(h.id, null, 20, 0);
      const balance = 500 - 30 - 40 + 10 - 20;
      expect(await t.balance(h.id)).toBe(balance);

      const ledger = await dash('get', '/ledger', h.token).expect(200);
      expect(ledger.body.nextCursor).toBeNull();
      const entries = ledger.body.entries;
      expect(entries.map((e: any) => [e.kind, e.amount])).toEqual([
        ['batch_charge', -20],
        ['task_refund', 10],
        ['batch_charge', -40],
        ['adjustment', -30],
        ['grant', 500],
      ]);
      expect(entries[0].balanceAfter).toBe(balance);
      expect(entries.reduce((s: number, e: any) => s + e.amount, 0)).toBe(balance);
      expect(entries[2]).toEqual({
        id: expect.stringMatching(/^\d+$/),
        amount: -40,
        balanceAfter: 430,
        kind: 'batch_charge',
        reason: expect.any(String),
        batchId: keyed,
        taskId: null,
        keyId: k.body.key.id,
        createdAt: expect.any(Number),
      });
      expect(entries[1]).toMatchObject({ batchId: keyed, taskId: expect.any(String), keyId: k.body.key.id });
      expect(entries[3]).toMatchObject({ reason: 'correction', batchId: null, keyId: null });

      const today = new Date().toISOString().slice(0, 10);
      const usage = await dash('get', '/usage', h.token).expect(200);
      expect(usage.body).toEqual({
        since: new Date(Date.now() - 29 * 86_400_000).toISOString().slice(0, 10),
        days: [
          { day: today, keyId: null, charged: 20, refunded: 0 },
          { day: today, keyId: k.body.key.id, charged: 40, refunded: 10 },
        ],
        totals: { charged: 60, refunded: 10 },
        images: [],
        // Ledger rows written directly, with no batch behind them: no batch to break down.
        byKeyAndModel: [],
      });
      // Usage is the ledger without grants and adjustments.
      expect(500 - 30 - usage.body.totals.charged + usage.body.totals.refunded).toBe(balance);

      const keys = await dash('get', '/keys', h.token).expect(200);
      expect(keys.body.keys[0].creditsUsedToday).toBe(30);
      const me = await t.http.get('/v1/me').set(bearer(k.body.secret)).expect(200);
      expect(me.body.key.creditsUsedToday).toBe(30);
      expect(me.body.credits.balance).toBe(balance);
    });

    it('usage counts a row on the UTC day it was written, within the window', async () => {
      const h = await holder({ credits: 100 });
      await chargeAndRefund(h.id, null, 7, 0);
      await t.db.query(`UPDATE ledger_entries SET created_at = now() - interval '3 days' WHERE account_id = $1 AND kind = 'batch_charge'`, [
        h.id,
      ]);
      const day = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
      expect((await dash('get', '/usage?days=4', h.token).expect(200)).body.days).toEqual([{ day, keyId: null, charged: 7, refunded: 0 }]);
      const short = await dash('get', '/usage?days=2', h.token).expect(200);
      expect(short.body.days).toEqual([]);
      expect(short.body.totals).toEqual({ charged: 0, refunded: 0 });
    });

    it('usage images: per UTC day of creation, the images batches ordered and those that succeeded', async () => {
      const h = await holder({ plan: 'studio', credits: 100 });
      const a = await dash('post', '/batches', h.token)
        .send({ prompts: ['a', 'b'], model: 'eta-image', countPerCombo: 2 })
        .expect(201);
      await dash('post', '/batches', h.token)
        .send({ prompts: ['c'], model: 'eta-image' })
        .expect(201);
      // Succeeded counts as the generator would leave them, and one batch moved to 3 days ago.
      await t.db.query(`UPDATE batches SET succeeded_count = 3 WHERE id = $1`, [a.body.id]);
      await t.db.query(`UPDATE batches SET created_at = now() - interval '3 days' WHERE account_id = $1 AND id <> $2`, [h.id, a.body.id]);
      const today = new Date().toISOString().slice(0, 10);
      const earlier = new Date(Date.now() - 3 * 86_400_000).toISOString().slice(0, 10);
      expect((await dash('get', '/usage?days=7', h.token).expect(200)).body.images).toEqual([
        { day: earlier, ordered: 1, succeeded: 0 },
        { day: today, ordered: 4, succeeded: 3 },
      ]);
      expect((await dash('get', '/usage?days=2', h.token).expect(200)).body.images).toEqual([{ day: today, ordered: 4, succeeded: 3 }]);
    });

    it.each(['0', '367', 'abc', '1.5', '-1'])('usage?days=%s -> 400 invalid_request', async (days) => {
      const h = await holder();
      const res = await dash('get', `/usage?days=${days}`, h.token);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.details.field).toBe('days');
    });

    it('usage?days=1 and days=366 are accepted; unknown query fields are not', async () => {
      const h = await holder();
      await dash('get', '/usage?days=1', h.token).expect(200);
      await dash('get', '/usage?days=366', h.token).expect(200);
      expectError(await dash('get', '/usage?day=3', h.token), 400, 'invalid_request');
    });

    it('the ledger pages newest first without gaps or repeats, even within one millisecond', async () => {
      const h = await holder();
      // Nine rows in one transaction share created_at exactly: only the id orders them.
      await t.db.transaction(async (m) => {
        let balance = 0;
        for (let i = 1; i <= 9; i++) {
          balance += i;
          await m.query(`UPDATE accounts SET balance = $2 WHERE id = $1`, [h.id, balance]);
          await m.query(`INSERT INTO ledger_entries (account_id, amount, balance_after, kind, reason) VALUES ($1, $2, $3, 'grant', $4)`, [
            h.id,
            i,
            balance,
            `grant ${i}`,
          ]);
        }
      });
      const seen: any[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
        const res = await dash('get', `/ledger${q}`, h.token).expect(200);
        expect(res.body.entries.length).toBeLessThanOrEqual(2);
        seen.push(...res.body.entries);
        cursor = res.body.nextCursor;
        pages++;
      } while (cursor && pages < 20);
      expect(pages).toBe(5);
      expect(seen.map((e) => e.amount)).toEqual([9, 8, 7, 6, 5, 4, 3, 2, 1]);
      expect(seen.reduce((s, e) => s + e.amount, 0)).toBe(await t.balance(h.id));
      expect(await t.ledgerSum(h.id)).toBe(await t.balance(h.id));
    });

    it.each([
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=x', 'limit'],
      ['cursor=garbage', 'cursor'],
      [`cursor=${Buffer.from('["2025-01-01T00:00:00.000Z","1"]').toString('base64url')}`, 'cursor'],
    ])('ledger?%s -> 400 invalid_request', async (q, field) => {
      const h = await holder();
      const res = await dash('get', `/ledger?${q}`, h.token);
      expectError(res, 400, 'invalid_request');
      expect(res.body.error.details.field).toBe(field);
    });
  });

  describe('batches from the dashboard', () => {
    const fox = { prompts: ['a red fox in the snow'], model: 'eta-image' }; // eta-image: 1 credit at 1K

    it('a free account creates batches within its plan: createdViaApi false, charged, no key', async () => {
      const h = await holder({ credits: 10 });
      const created = await dash('post', '/batches', h.token)
        .send({ ...fox, countPerCombo: 4, note: 'from the dashboard' })
        .expect(201);
      expect(created.body).toEqual({ id: expect.any(String), total: 4, creditsCharged: 4, status: 'pending', tier: 'standard' });

      const detail = await dash('get', `/batches/${created.body.id}`, h.token).expect(200);
      expect(detail.body.batch).toMatchObject({
        id: created.body.id,
        createdViaApi: false,
        total: 4,
        note: 'from the dashboard',
        creditsCharged: 4,
        creditsRefunded: 0,
        done: false,
        counts: { pending: 4, running: 0, succeeded: 0, failed: 0 },
      });
      expect(detail.body.tasks).toHaveLength(4);
      const list = await dash('get', '/batches', h.token).expect(200);
      expect(list.body).toEqual({ batches: [expect.objectContaining({ id: created.body.id, createdViaApi: false })], nextCursor: null });

      const acc = await dash('get', '/account', h.token).expect(200);
      expect(acc.body.account.balance).toBe(6);
      expect(acc.body.limits.activeBatches).toBe(1);
      const ledger = await dash('get', '/ledger', h.token).expect(200);
      expect(ledger.body.entries[0]).toMatchObject({
        kind: 'batch_charge',
        amount: -4,
        balanceAfter: 6,
        batchId: created.body.id,
        keyId: null,
      });
      const usage = await dash('get', '/usage', h.token).expect(200);
      expect(usage.body.days).toEqual([{ day: new Date().toISOString().slice(0, 10), keyId: null, charged: 4, refunded: 0 }]);
    });

    it("an image's file downloads from Kiln's own origin as an attachment; only a succeeded image of the holder's batch", async () => {
      const h = await holder({ credits: 10 });
      const other = await holder({ credits: 10 });
      const batchId = (await dash('post', '/batches', h.token).send(fox).expect(201)).body.id as string;
      const [task] = await t.db.query(`SELECT id, seq FROM tasks WHERE batch_id = $1`, [batchId]);
      const path = `/batches/${batchId}/tasks/${task.id}/file`;
      // Not made yet: nothing to download, and nothing written.
      expectError(await dash('get', path, h.token), 404, 'not_found');

      // The task succeeds (no generator here): its image stored, the row pointing at it.
      const png = await solidPng(8, 8, { r: 200, g: 80, b: 20 });
      const key = resultObjectKey(newObjectToken(), batchId, task.seq + 1, 'png');
      await t.app.get(StorageDriver).put(key, png, 'image/png');
      await t.db.query(`UPDATE tasks SET status = 'succeeded', progress = 100, result_key = $2, finished_at = now() WHERE id = $1`, [
        task.id,
        key,
      ]);

      const res = await dash('get', path, h.token)
        .buffer(true)
        .parse((r, done) => {
          const chunks: Buffer[] = [];
          r.on('data', (c: Buffer) => chunks.push(c));
          r.on('end', () => done(null, Buffer.concat(chunks)));
        })
        .expect(200);
      expect(res.headers['content-type']).toBe('image/png');
      expect(res.headers['content-disposition']).toBe(`attachment; filename="kiln-${batchId}-${task.seq + 1}.png"`);
      expect(Buffer.compare(res.body as Buffer, png)).toBe(0);

      // Another holder, a malformed id, no session: refused with the error object.
      expectError(await dash('get', path, other.token), 404, 'not_found');
      expectError(await dash('get', `/batches/${batchId}/tasks/not-a-task/file`, h.token), 404, 'not_found');
      expectError(await t.http.get(`/v1/dashboard${path}`), 401, 'unauthorized');
      // Removed from storage since (retention): not_found, not a 500.
      await t.app.get(StorageDriver).remove(key);
      expectError(await dash('get', path, h.token), 404, 'not_found');
    });

    it('plan limits, money and validation refuse with the codes of POST /v1/batches', async () => {
      const h = await holder({ credits: 2 });
      let res = await dash('post', '/batches', h.token).send({ ...fox, countPerCombo: 5 });
      expectError(res, 403, 'batch_limit_exceeded');
      expect(res.body.error.details).toEqual({ total: 5, max: 4 });
      res = await dash('post', '/batches', h.token).send({ ...fox, countPerCombo: 3 });
      expectError(res, 402, 'insufficient_credits');
      expect(res.body.error.details).toEqual({ required: 3, balance: 2 });
      expectError(await dash('post', '/batches', h.token).send({ ...fox, model: 'no-such-model' }), 400, 'unknown_model');
      expectError(await dash('post', '/batches', h.token).send({ ...fox, aspectRatio: '21:9', resolution: '4K' }), 400, 'size_not_allowed');
      expectError(await dash('post', '/batches', h.token).send({ ...fox, colour: 'red' }), 400, 'invalid_request');
      expectError(await dash('post', '/batches', h.token).send({ model: 'eta-image', prompts: ['  '] }), 400, 'invalid_request');
      expectError(await dash('get', '/batches?limit=0', h.token), 400, 'invalid_request');
      expectError(await dash('get', '/batches?cursor=garbage', h.token), 400, 'invalid_request');

      await dash('post', '/batches', h.token).send(fox).expect(201);
      res = await dash('post', '/batches', h.token).send(fox);
      expectError(res, 403, 'concurrent_limit_exceeded');
      expect(res.body.error.details).toEqual({ active: 1, max: 1 });
      expect(await t.balance(h.id)).toBe(1);
      expect(await t.ledgerSum(h.id)).toBe(1);
    });

    it('API and dashboard batches are one list; a daily cap set in the dashboard binds POST /v1/batches only', async () => {
      const h = await holder({ plan: 'studio', credits: 100 });
      const k = await dash('post', '/keys', h.token).send({ name: 'capped', creditCapPerDay: 3 }).expect(201);
      const viaKey = (body: object) => t.http.post('/v1/batches').set(bearer(k.body.secret)).send(body);

      let res = await viaKey({ ...fox, countPerCombo: 4 });
      expectError(res, 402, 'daily_credit_cap_exceeded');
      expect(res.body.error.details).toMatchObject({ cap: 3, used: 0, required: 4 });
      const apiBatch = await viaKey({ ...fox, countPerCombo: 3 }).expect(201);
      res = await viaKey(fox);
      expectError(res, 402, 'daily_credit_cap_exceeded');
      expect(res.body.error.details).toMatchObject({ cap: 3, used: 3, required: 1 });

      // The dashboard has no key, so no key cap.
      const dashBatch = await dash('post', '/batches', h.token)
        .send({ ...fox, countPerCombo: 5 })
        .expect(201);

      const list = await dash('get', '/batches', h.token).expect(200);
      expect(list.body.batches.map((b: any) => [b.id, b.createdViaApi])).toEqual([
        [dashBatch.body.id, false],
        [apiBatch.body.id, true],
      ]);
      const viaApi = await t.http.get('/v1/batches').set(bearer(k.body.secret)).expect(200);
      expect(viaApi.body.batches.map((b: any) => [b.id, b.createdViaApi])).toEqual([
        [dashBatch.body.id, false],
        [apiBatch.body.id, true],
      ]);
      await t.http.get(`/v1/batches/${dashBatch.body.id}`).set(bearer(k.body.secret)).expect(200);

      const keys = await dash('get', '/keys', h.token).expect(200);
      expect(keys.body.keys[0]).toMatchObject({ id: k.body.key.id, creditCapPerDay: 3, creditsUsedToday: 3 });

      // Raising the cap in the dashboard lets the key spend again at once.
      await dash('patch', `/keys/${k.body.key.id}`, h.token).send({ creditCapPerDay: 4 }).expect(200);
      await viaKey(fox).expect(201);
      await dash('patch', `/keys/${k.body.key.id}`, h.token).send({ creditCapPerDay: null }).expect(200);
      await viaKey({ ...fox, countPerCombo: 10 }).expect(201);
    });

    it('usage and ledger match the balance after charges and a refunded task', async () => {
      const h = await holder({ plan: 'studio', credits: 50 });
      const k = await dash('post', '/keys', h.token).send({ name: 'k' }).expect(201);
      const apiBatch = await t.http
        .post('/v1/batches')
        .set(bearer(k.body.secret))
        .send({ ...fox, countPerCombo: 3 })
        .expect(201);
      await dash('post', '/batches', h.token)
        .send({ ...fox, countPerCombo: 2 })
        .expect(201);

      // One task of the API batch fails: refunded as the generator would, in one transaction.
      const [task] = await t.db.query(`SELECT id FROM tasks WHERE batch_id = $1 ORDER BY seq LIMIT 1`, [apiBatch.body.id]);
      const billing = t.app.get(BillingService);
      await t.db.transaction(async (m) => {
        await m.query(`UPDATE tasks SET status = 'failed', error = 'upstream failure' WHERE id = $1`, [task.id]);
        await m.query(`UPDATE batches SET credits_refunded = credits_refunded + 1 WHERE id = $1`, [apiBatch.body.id]);
        await billing.refundTask(m, {
          accountId: h.id,
          batchId: apiBatch.body.id,
          taskId: task.id,
          amount: 1,
        });
      });

      const balance = 50 - 3 - 2 + 1;
      expect(await t.balance(h.id)).toBe(balance);
      const ledger = (await dash('get', '/ledger', h.token).expect(200)).body.entries;
      expect(ledger.map((e: any) => [e.kind, e.amount, e.keyId])).toEqual([
        ['task_refund', 1, k.body.key.id],
        ['batch_charge', -2, null],
        ['batch_charge', -3, k.body.key.id],
        ['grant', 50, null],
      ]);
      expect(ledger[0]).toMatchObject({ batchId: apiBatch.body.id, taskId: task.id, balanceAfter: balance });
      expect(ledger.reduce((s: number, e: any) => s + e.amount, 0)).toBe(balance);

      const usage = (await dash('get', '/usage?days=7', h.token).expect(200)).body;
      const today = new Date().toISOString().slice(0, 10);
      expect(usage.days).toEqual([
        { day: today, keyId: null, charged: 2, refunded: 0 },
        { day: today, keyId: k.body.key.id, charged: 3, refunded: 1 },
      ]);
      expect(usage.totals).toEqual({ charged: 5, refunded: 1 });
      expect(50 - usage.totals.charged + usage.totals.refunded).toBe(balance);

      const keys = (await dash('get', '/keys', h.token).expect(200)).body.keys;
      expect(keys[0].creditsUsedToday).toBe(2);
      expect((await t.http.get('/v1/me').set(bearer(k.body.secret)).expect(200)).body.key.creditsUsedToday).toBe(2);
      const detail = (await dash('get', `/batches/${apiBatch.body.id}`, h.token).expect(200)).body;
      expect(detail.batch).toMatchObject({
        creditsCharged: 3,
        creditsRefunded: 1,
        counts: { pending: 2, running: 0, succeeded: 0, failed: 1 },
      });
    });
  });

  describe('isolation between accounts', () => {
    it("one account can never see or touch another's keys, batches, usage or ledger", async () => {
      const owner = await holder({ plan: 'starter', credits: 100 });
      const other = await holder({ plan: 'starter', credits: 7 });
      const k = await dash('post', '/keys', owner.token).send({ name: 'mine' }).expect(201);
      const keyId = k.body.key.id;
      await dash('post', '/keys', other.token).send({ name: 'theirs' }).expect(201);

      for (const id of [keyId, randomUUID(), 'not-a-uuid', '1']) {
        expectError(await dash('patch', `/keys/${id}`, other.token).send({ name: 'stolen' }), 404, 'not_found');
        expectError(await dash('patch', `/keys/${id}`, other.token).send({ creditCapPerDay: 1 }), 404, 'not_found');
        expectError(await dash('delete', `/keys/${id}`, other.token), 404, 'not_found');
      }
      // Untouched, and still working.
      const mine = await dash('get', '/keys', owner.token).expect(200);
      expect(mine.body.keys).toEqual([expect.objectContaining({ id: keyId, name: 'mine', creditCapPerDay: null, revokedAt: null })]);
      await t.http.get('/v1/me').set(bearer(k.body.secret)).expect(200);

      const batch = await dash('post', '/batches', owner.token)
        .send({ prompts: ['mine'], model: 'eta-image' })
        .expect(201);
      for (const id of [batch.body.id, randomUUID(), 'not-a-uuid']) {
        expectError(await dash('get', `/batches/${id}`, other.token), 404, 'not_found');
      }
      expect((await dash('get', '/batches', other.token).expect(200)).body).toEqual({ batches: [], nextCursor: null });
      const ownerBatches = await dash('get', '/batches', owner.token).expect(200);
      expect(ownerBatches.body.batches.map((b: any) => b.id)).toEqual([batch.body.id]);

      const theirs = await dash('get', '/keys', other.token).expect(200);
      expect(theirs.body.keys.map((x: any) => x.name)).toEqual(['theirs']);

      const ledger = await dash('get', '/ledger', other.token).expect(200);
      expect(ledger.body.entries.map((e: any) => e.amount)).toEqual([7]);
      expect((await dash('get', '/ledger', owner.token).expect(200)).body.entries.map((e: any) => e.amount)).toEqual([-1, 100]);
      const usage = await dash('get', '/usage', other.token).expect(200);
      expect(usage.body.days).toEqual([]);

      // A cursor taken from another account's ledger only positions within one's own.
      await t.admin('post', `/v1/admin/accounts/${owner.id}/credits`).send({ amount: 5, reason: 'more' }).expect(200);
      const ownerPage = await dash('get', '/ledger?limit=1', owner.token).expect(200);
      expect(ownerPage.body.entries.map((e: any) => e.amount)).toEqual([5]);
      const crossed = await dash('get', `/ledger?cursor=${ownerPage.body.nextCursor}`, other.token).expect(200);
      expect(crossed.body.entries.map((e: any) => e.amount)).toEqual([7]);
      const acc = await dash('get', '/account', other.token).expect(200);
      expect(acc.body.account).toMatchObject({ id: other.id, balance: 7 });
    });
  });

  it('every dashboard route is in the OpenAPI document under the Dashboard tag, with session auth', async () => {
    const doc = (await t.http.get('/v1/openapi.json').expect(200)).body;
    const ops: Array<[string, string, any]> = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      if (!path.startsWith('/v1/dashboard')) continue;
      for (const [method, op] of Object.entries<any>(item)) ops.push([method.toUpperCase(), path, op]);
    }
    const names = ops.map(([m, p]) => `${m} ${p}`);
    expect(names).toEqual(
      expect.arrayContaining([
        'POST /v1/dashboard/signup',
        'POST /v1/dashboard/login',
        'POST /v1/dashboard/logout',
        'GET /v1/dashboard/account',
        'GET /v1/dashboard/keys',
        'POST /v1/dashboard/keys',
        'PATCH /v1/dashboard/keys/{id}',
        'DELETE /v1/dashboard/keys/{id}',
        'GET /v1/dashboard/usage',
        'GET /v1/dashboard/ledger',
        'GET /v1/dashboard/batches',
        'POST /v1/dashboard/batches',
        'GET /v1/dashboard/batches/{id}',
      ]),
    );
    for (const [method, path, op] of ops) {
      expect({ route: `${method} ${path}`, tags: op.tags }).toEqual({ route: `${method} ${path}`, tags: ['Dashboard'] });
      const open = path.endsWith('/signup') || path.endsWith('/login');
      expect({ route: `${method} ${path}`, security: op.security ?? null }).toEqual({
        route: `${method} ${path}`,
        // Signup and login take no credential, and say so: [{}] (anonymous allowed).
        security: open ? [{}] : [{ session: [] }],
      });
    }
  });
});

describe('Dashboard signup and login rate limits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootDashboardApp({ loginPerIp: 7, loginFailuresPerEmailAndIp: 3, loginFailuresPerEmailPerHour: 1000, signupPerIp: 5 });
  });
  afterAll(() => t.close());

  const expect429 = (res: { status: number; body: any; headers: Record<string, string> }) => {
    expect(res.status).toBe(429);
    expect(res.body.error.code).toBe('rate_limited');
    expect(res.headers['retry-after']).toMatch(/^\d+$/);
    expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers['retry-after'])).toBeLessThanOrEqual(60);
  };

  it('per email, then per IP, then signups per IP', async () => {
    const address = email();
    await t.http.post('/v1/dashboard/signup').send({ email: address, password: PASSWORD }).expect(201); // signup 1/5

    // Per email (3/min), in any case: even the right password is refused once over the limit.
    for (let i = 0; i < 3; i++) {
      const res = await t.http
        .post('/v1/dashboard/login')
        .send({ email: i === 1 ? address.toUpperCase() : address, password: 'wrong password' });
      expect(res.status).toBe(401);
      expect(res.headers['ratelimit-limit']).toBeDefined();
    }
    expect429(await t.http.post('/v1/dashboard/login').send({ email: address, password: PASSWORD })); // IP 4/7

    // Per IP (7/min): other emails still get three more attempts from this address.
    for (let i = 0; i < 3; i++) {
      expect((await t.http.post('/v1/dashboard/login').send({ email: email(), password: PASSWORD })).status).toBe(401);
    }
    expect429(await t.http.post('/v1/dashboard/login').send({ email: email(), password: PASSWORD }));

    // Signups per IP (5/min).
    for (let i = 0; i < 4; i++) {
      await t.http.post('/v1/dashboard/signup').send({ email: email(), password: PASSWORD }).expect(201);
    }
    expect429(await t.http.post('/v1/dashboard/signup').send({ email: email(), password: PASSWORD }));
  });
});

describe('Dashboard sign-in limits behind a proxy (TRUST_PROXY)', () => {
  const login = (t: TestApp, forwardedFor: string) =>
    t.http.post('/v1/dashboard/login').set('X-Forwarded-For', forwardedFor).send({ email: email(), password: PASSWORD });

  it('trusted (loopback): each client address named by the proxy has its own per-IP limit', async () => {
    const t = await bootDashboardApp(
      { loginPerIp: 2, loginFailuresPerEmailAndIp: 100, loginFailuresPerEmailPerHour: 1000, signupPerIp: 100 },
      { TRUST_PROXY: 'loopback' },
    );
    try {
      for (let i = 0; i < 2; i++) expect((await login(t, '203.0.113.7')).status).toBe(401);
      expect((await login(t, '203.0.113.7')).status).toBe(429);
      expect((await login(t, '203.0.113.8')).status).toBe(401);
    } finally {
      await t.close();
    }
  });

  it('not trusted (the default): a client cannot pick its own bucket by sending the header', async () => {
    const t = await bootDashboardApp({
      loginPerIp: 2,
      loginFailuresPerEmailAndIp: 100,
      loginFailuresPerEmailPerHour: 1000,
      signupPerIp: 100,
    });
    try {
      expect((await login(t, '198.51.100.1')).status).toBe(401);
      expect((await login(t, '198.51.100.2')).status).toBe(401);
      expect((await login(t, '198.51.100.3')).status).toBe(429);
    } finally {
      await t.close();
    }
  });
});

describe('sign-up on an installation that starts accounts with credits (SIGNUP_CREDITS, SIGNUP_PLAN)', () => {
  const limits = { loginPerIp: 1000, loginFailuresPerEmailAndIp: 1000, loginFailuresPerEmailPerHour: 1000, signupPerIp: 1000 };

  it('gives each new account the plan and one grant row of the credits; balance equals the ledger', async () => {
    const t = await bootDashboardApp(limits, { SIGNUP_CREDITS: '50', SIGNUP_PLAN: 'starter' });
    try {
      const res = await t.http.post('/v1/dashboard/signup').send({ email: email(), password: PASSWORD }).expect(201);
      const account = (await t.http.get('/v1/dashboard/account').set(bearer(res.body.token)).expect(200)).body.account;
      expect({ plan: account.plan, balance: account.balance }).toEqual({ plan: 'starter', balance: 50 });
      const ledger = await t.db.query(`SELECT kind, amount::int AS amount, reason FROM ledger_entries WHERE account_id = $1`, [account.id]);
      expect(ledger).toEqual([{ kind: 'grant', amount: 50, reason: 'Sign-up credits' }]);
      expect(await t.ledgerSum(account.id)).toBe(50);
    } finally {
      await t.close();
    }
  });

  it('the account and its sign-up grant commit together: a failure between them leaves no account, and the same email then signs up whole', async () => {
    const t = await bootDashboardApp(limits, { SIGNUP_CREDITS: '50' });
    try {
      const billing = t.app.get(BillingService);
      // The grant's ledger row fails, after the account row and its balance were written.
      const crash = jest
        .spyOn(billing as unknown as { insertLedger: () => Promise<void> }, 'insertLedger')
        .mockRejectedValueOnce(new Error('crash between the account and its grant'));
      const address = email();
      const failed = await t.http.post('/v1/dashboard/signup').send({ email: address, password: PASSWORD });
      expect(failed.status).toBe(500);
      expect(crash).toHaveBeenCalledTimes(1);
      crash.mockRestore();
      expect(await t.db.query(`SELECT id FROM accounts WHERE lower(email) = lower($1)`, [address])).toEqual([]);
      const res = await t.http.post('/v1/dashboard/signup').send({ email: address, password: PASSWORD }).expect(201);
      const account = (await t.http.get('/v1/dashboard/account').set(bearer(res.body.token)).expect(200)).body.account;
      expect(account.balance).toBe(50);
      const ledger = await t.db.query(`SELECT kind, amount::int AS amount FROM ledger_entries WHERE account_id = $1`, [account.id]);
      expect(ledger).toEqual([{ kind: 'grant', amount: 50 }]);
    } finally {
      await t.close();
    }
  });

  it('refuses to boot with a SIGNUP_PLAN that names no plan, and a negative SIGNUP_CREDITS is a configuration error', async () => {
    await expect(bootDashboardApp(limits, { SIGNUP_PLAN: 'gold' })).rejects.toThrow(
      /SIGNUP_PLAN must be one of free, starter, studio, scale/,
    );
    expect(() => buildConfig({ ...process.env, SIGNUP_CREDITS: '-1' })).toThrow(/SIGNUP_CREDITS/);
  });
});
