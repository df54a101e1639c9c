import { randomUUID } from 'node:crypto';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { bootTestApp, TestApp } from '@app/testing';

describe('Operator admin API (docs/admin.md)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(() => t.close());

  const email = () => `admin-${randomUUID()}@example.test`;

  it('refuses a missing or wrong admin token', async () => {
    const none = await t.http.get('/v1/admin/accounts');
    expect(none.status).toBe(401);
    expect(none.body.error.code).toBe('unauthorized');
    const wrong = await t.http.get('/v1/admin/accounts').set('Authorization', 'Bearer not-the-token-at-all');
    expect(wrong.status).toBe(401);
    const apiKey = await t.account();
    const withKey = await t.http.get('/v1/admin/accounts').set('Authorization', `Bearer ${apiKey.key}`);
    expect(withKey.status).toBe(401);
  });

  it('creates an account with credits recorded as a ledger grant', async () => {
    const e = email();
    const res = await t.admin('post', '/v1/admin/accounts').send({ email: e, plan: 'starter', credits: 250 }).expect(201);
    expect(res.body.account).toEqual({
      id: expect.any(String),
      email: e,
      plan: 'starter',
      status: 'active',
      balance: 250,
      createdAt: expect.any(Number),
    });
    const ledger = await t.db.query(`SELECT amount, kind, balance_after FROM ledger_entries WHERE account_id = $1`, [res.body.account.id]);
    expect(ledger).toEqual([{ amount: '250', kind: 'grant', balance_after: '250' }]);
  });

  it('refuses bad account bodies with invalid_request and writes nothing', async () => {
    const bodies: Record<string, unknown>[] = [
      { plan: 'studio' },
      { email: 'not-an-email', plan: 'studio' },
      { email: email(), plan: 'platinum' },
      { email: email(), plan: 'studio', credits: -5 },
      { email: email(), plan: 'studio', extra: true },
    ];
    // Only this test's emails: other files create accounts in the same database meanwhile.
    const emails = bodies.flatMap((b) => (typeof b.email === 'string' ? [b.email] : []));
    const count = async () =>
      (await t.db.query(`SELECT count(*)::int AS n FROM accounts WHERE lower(email) = ANY($1)`, [emails.map((e) => e.toLowerCase())]))[0].n;
    for (const body of bodies) {
      const res = await t.admin('post', '/v1/admin/accounts').send(body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
      expect(res.body.error.details.field).toEqual(expect.any(String));
    }
    expect(await count()).toBe(0);
  });

  it('refuses a duplicate email, whatever its case', async () => {
    const e = email();
    await t.admin('post', '/v1/admin/accounts').send({ email: e, plan: 'studio' }).expect(201);
    const dup = await t.admin('post', '/v1/admin/accounts').send({ email: e.toUpperCase(), plan: 'studio' });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('email_taken');
  });

  it('gets, lists with a cursor, and 404s unknown or malformed ids', async () => {
    const a = await t.account();
    const got = await t.admin('get', `/v1/admin/accounts/${a.id}`).expect(200);
    expect(got.body.account.id).toBe(a.id);
    for (const id of [randomUUID(), 'not-a-uuid']) {
      const res = await t.admin('get', `/v1/admin/accounts/${id}`);
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    for (let i = 0; i < 3; i++) await t.account();
    // Other test files create accounts concurrently: every account that existed before the
    // walk must be seen exactly once; newer ones may or may not appear.
    const before: Array<{ id: string }> = await t.db.query(`SELECT id FROM accounts`);
    const seen = new Set<string>();
    let cursor: string | null = null;
    let pages = 0;
    do {
      const q: string = cursor ? `?limit=2&cursor=${cursor}` : '?limit=2';
      const page = await t.admin('get', `/v1/admin/accounts${q}`).expect(200);
      for (const acc of page.body.accounts) {
        expect(seen.has(acc.id)).toBe(false);
        seen.add(acc.id);
      }
      cursor = page.body.nextCursor;
      pages++;
    } while (cursor && pages < 1000);
    for (const { id } of before) expect(seen.has(id)).toBe(true);
    const bad = await t.admin('get', '/v1/admin/accounts?cursor=%%%');
    expect(bad.status).toBe(400);
    expect(bad.body.error.details).toEqual({ field: 'cursor', reason: 'malformed' });
    const badLimit = await t.admin('get', '/v1/admin/accounts?limit=0');
    expect(badLimit.body.error.details).toEqual({ field: 'limit', reason: 'out_of_range' });
  });

  it('the account list pages without gaps across accounts created within one millisecond', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await t.account()).id);
    // Far ahead, so they are the list's first page whatever other files create meanwhile;
    // microseconds apart inside one millisecond (what the cursor holds).
    for (const [i, id] of ids.entries()) {
      await t.db.query(`UPDATE accounts SET created_at = $2::timestamptz WHERE id = $1`, [id, `2999-01-01T00:00:00.1231${i}0Z`]);
    }
    const walked: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 3; page++) {
      const res: { body: { accounts: { id: string }[]; nextCursor: string | null } } = await t
        .admin('get', `/v1/admin/accounts?limit=1${cursor ? `&cursor=${cursor}` : ''}`)
        .expect(200);
      walked.push(res.body.accounts[0].id);
      cursor = res.body.nextCursor;
    }
    expect(new Set(walked)).toEqual(new Set(ids));
    await t.db.query(`UPDATE accounts SET created_at = now() WHERE id = ANY($1::uuid[])`, [ids]);
  });

  it('changes plan and status', async () => {
    const a = await t.account({ plan: 'starter' });
    const res = await t.admin('patch', `/v1/admin/accounts/${a.id}`).send({ plan: 'scale', status: 'disabled' }).expect(200);
    expect(res.body.account).toMatchObject({ plan: 'scale', status: 'disabled' });
    const bad = await t.admin('patch', `/v1/admin/accounts/${a.id}`).send({ status: 'deleted' });
    expect(bad.status).toBe(400);
  });

  it('grants and adjusts credits, never below zero, each a ledger row', async () => {
    const a = await t.account({ credits: 100 });
    const grant = await t.admin('post', `/v1/admin/accounts/${a.id}/credits`).send({ amount: 50, reason: 'promo' }).expect(200);
    expect(grant.body.account.balance).toBe(150);
    const down = await t.admin('post', `/v1/admin/accounts/${a.id}/credits`).send({ amount: -30, reason: 'correction' }).expect(200);
    expect(down.body.account.balance).toBe(120);
    const tooFar = await t.admin('post', `/v1/admin/accounts/${a.id}/credits`).send({ amount: -121, reason: 'oops' });
    expect(tooFar.status).toBe(400);
    expect(tooFar.body.error.details).toMatchObject({ field: 'amount', reason: 'balance_below_zero', balance: 120 });
    const zero = await t.admin('post', `/v1/admin/accounts/${a.id}/credits`).send({ amount: 0, reason: 'noop' });
    expect(zero.status).toBe(400);
    expect(await t.balance(a.id)).toBe(120);
    expect(await t.ledgerSum(a.id)).toBe(120);
    const kinds = await t.db.query(`SELECT kind, reason FROM ledger_entries WHERE account_id = $1 ORDER BY id`, [a.id]);
    expect(kinds.map((k: any) => k.kind)).toEqual(['grant', 'grant', 'adjustment']);
  });

  // A balance may go below zero since purchase refunds (docs/billing.md#refunds): what keeps
  // charges and adjustments from overdrawing is their conditional UPDATE, tested above and in
  // ledger.e2e-spec.ts; a refund after spend is in stripe-purchases.e2e-spec.ts.

  it('creates keys for an account within the plan limit', async () => {
    const res = await t.admin('post', '/v1/admin/accounts').send({ email: email(), plan: 'starter' }).expect(201);
    const id = res.body.account.id;
    const k1 = await t
      .admin('post', `/v1/admin/accounts/${id}/keys`)
      .send({ name: 'ci', scopes: ['models:read'], creditCapPerDay: 10 })
      .expect(201);
    expect(k1.body.secret).toMatch(/^kiln_live_[0-9A-Za-z]{32}$/);
    expect(k1.body.key).toMatchObject({ name: 'ci', scopes: ['models:read'], creditCapPerDay: 10, revokedAt: null, lastUsedAt: null });
    await t.admin('post', `/v1/admin/accounts/${id}/keys`).send({}).expect(201);
    const third = await t.admin('post', `/v1/admin/accounts/${id}/keys`).send({});
    expect(third.status).toBe(403);
    expect(third.body.error).toMatchObject({ code: 'key_limit_exceeded', details: { active: 2, max: 2 } });
    const badScope = await t.admin('post', `/v1/admin/accounts/${id}/keys`).send({ scopes: ['everything'] });
    expect(badScope.status).toBe(400);
  });

  it('lists and edits models, validating the combination', async () => {
    const list = await t.admin('get', '/v1/admin/models').expect(200);
    expect(list.body.models).toHaveLength(16);
    expect(list.body.models[0].provider).toEqual({ type: 'builtin' });
    const ok = await t
      .admin('patch', '/v1/admin/models/beta-2-lite')
      .send({ provider: { type: 'simulated', latencyMs: { min: 1, max: 5 }, failureRate: 0.1, rateLimitRate: 0 }, maxPromptLength: 500 })
      .expect(200);
    expect(ok.body.model).toMatchObject({ maxPromptLength: 500, provider: { type: 'simulated', failureRate: 0.1 } });
    const capped = await t
      .admin('patch', '/v1/admin/models/beta-2-lite')
      .send({ provider: { type: 'openai', baseUrl: 'https://upstream.example/v1', model: 'img', maxConcurrency: 8, ratePerMinute: 60 } })
      .expect(200);
    expect(capped.body.model.provider).toMatchObject({ type: 'openai', maxConcurrency: 8, ratePerMinute: 60 });
    await t
      .admin('patch', '/v1/admin/models/beta-2-lite')
      .send({ provider: { type: 'builtin' }, maxPromptLength: 4000 })
      .expect(200);
    const refusals = [
      { provider: { type: 'simulated', maxConcurrency: 0 } },
      { provider: { type: 'openai', baseUrl: 'https://upstream.example/v1', model: 'img', maxConcurrency: 2.5 } },
      { provider: { type: 'openai', baseUrl: 'https://upstream.example/v1', model: 'img', maxConcurrency: 10_001 } },
      { provider: { type: 'openai', baseUrl: 'https://upstream.example/v1', model: 'img', ratePerMinute: 0 } },
      { provider: { type: 'simulated', ratePerMinute: 1.5 } },
      { resolutionsByRatio: { '1:1': ['4K'] } },
      { creditCost: { '8K': 5 } },
      { provider: { type: 'quantum' } },
      { provider: { type: 'simulated', failureRate: 2 } },
      { provider: { type: 'openai', baseUrl: 'not a url', model: 'x' } },
    ];
    for (const body of refusals) {
      const res = await t.admin('patch', '/v1/admin/models/beta-2-lite').send(body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('invalid_request');
    }
    const missing = await t.admin('patch', '/v1/admin/models/no-such-model').send({ enabled: true });
    expect(missing.status).toBe(404);
  });

  it('edits plans, including the rate limit', async () => {
    const res = await t.admin('patch', '/v1/admin/plans/starter').send({ requestsPerMinute: 121 }).expect(200);
    expect(res.body.plan).toMatchObject({ key: 'starter', requestsPerMinute: 121 });
    await t.admin('patch', '/v1/admin/plans/starter').send({ requestsPerMinute: 120 }).expect(200);
    const plans = await t.admin('get', '/v1/admin/plans').expect(200);
    expect(plans.body.plans.map((p: any) => p.key)).toEqual(['free', 'starter', 'studio', 'scale']);
  });

  it('reports queue counts, and the backlog of tasks pending in PostgreSQL', async () => {
    const res = await t.admin('get', '/v1/admin/queues').expect(200);
    expect(res.body.queues[0]).toMatchObject({
      name: 'kiln-tasks',
      waiting: expect.any(Number),
      active: expect.any(Number),
      delayed: expect.any(Number),
      failed: expect.any(Number),
      pending: expect.any(Number),
    });
    const before = res.body.queues[0].pending;
    const a = await t.account();
    const batch = await t.http
      .post('/v1/batches')
      .set('Authorization', `Bearer ${a.key}`)
      .send({ model: 'eta-image', prompts: ['one', 'two', 'three'] })
      .expect(201);
    // As if the queue had been full: the tasks wait in PostgreSQL for a feeder.
    await t.db.query(`UPDATE tasks SET status = 'pending' WHERE batch_id = $1`, [batch.body.id]);
    const after = await t.admin('get', '/v1/admin/queues').expect(200);
    // Other files share this database and only ever add pending tasks.
    expect(after.body.queues[0].pending).toBeGreaterThanOrEqual(before + 3);
  });
});
