import { randomUUID } from 'node:crypto';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { DASHBOARD_AUTH_LIMITS } from '../apps/api/src/dashboard/login-throttle.service';
import { KILN_CONFIG } from '@app/config';
import { bootTestApp, FileEnvironment, fileEnvironment, TestApp } from '@app/testing';

const PASSWORD = 'correct horse battery';
const bearer = (token: string) => ({ Authorization: `Bearer ${token}` });

/** GET /v1/dashboard/batches with filters (docs/dashboard.md#batches): status, model, dates, text; paged by cursor. */
describe('Dashboard batch filters and search', () => {
  let t: TestApp;
  let env: FileEnvironment;
  let token = '';
  let accountId = '';
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    // A database of its own: on the run's shared one, another file's edit of a seeded model
    // (eta-image, delta) could refuse these creations (400 in a fresh-clone CI run).
    env = await fileEnvironment('batch_search');
    t = await bootTestApp(ApiModule, configureApp, [
      [KILN_CONFIG, env.config],
      [
        DASHBOARD_AUTH_LIMITS,
        { loginPerIp: 1000, loginFailuresPerEmailAndIp: 1000, loginFailuresPerEmailPerHour: 1000, signupPerIp: 1000 },
      ],
    ]);
    const res = await t.http
      .post('/v1/dashboard/signup')
      .send({ email: `s-${randomUUID()}@example.test`, password: PASSWORD })
      .expect(201);
    token = res.body.token;
    accountId = (await t.http.get('/v1/dashboard/account').set(bearer(token)).expect(200)).body.account.id;
    await t.admin('patch', `/v1/admin/accounts/${accountId}`).send({ plan: 'studio' }).expect(200);
    await t.admin('post', `/v1/admin/accounts/${accountId}/credits`).send({ amount: 1000, reason: 'test grant' }).expect(200);
    const make = async (name: string, body: Record<string, unknown>, status: string, daysAgo: number) => {
      const created = await t.http.post('/v1/dashboard/batches').set(bearer(token)).set('X-Kiln-Session', 'cookie').send(body);
      if (created.status !== 201) throw new Error(JSON.stringify(created.body));
      ids[name] = created.body.id;
      await t.db.query(`UPDATE batches SET status = $2, created_at = $3 WHERE id = $1`, [
        created.body.id,
        status,
        new Date(Date.parse('2026-11-20T12:00:00Z') - daysAgo * 86_400_000),
      ]);
    };
    await make('fox', { prompts: ['A red FOX in the snow'], model: 'eta-image', note: 'winter set' }, 'succeeded', 0);
    await make('pier', { prompts: ['a pier at dusk', 'a "quoted" pier, 100%_sure'], model: 'eta-image' }, 'failed', 1);
    await make('gull', { prompts: ['a gull over the sea'], model: 'delta', note: 'Lighthouse series' }, 'partial', 2);
    await make('owl', { prompts: ['an owl at night'], model: 'delta' }, 'running', 5);
  });
  afterAll(async () => {
    await t?.close();
    await env?.teardown();
  });

  const list = async (query: string) => {
    const res = await t.http.get(`/v1/dashboard/batches?${query}`).set(bearer(token));
    expect(res.status).toBe(200);
    return (res.body.batches as Array<{ id: string }>).map((b) => Object.entries(ids).find(([, id]) => id === b.id)?.[0]);
  };

  it('filters by status (any of a list), model and created dates, newest first', async () => {
    expect(await list('')).toEqual(['fox', 'pier', 'gull', 'owl']);
    expect(await list('status=failed,partial')).toEqual(['pier', 'gull']);
    expect(await list('status=running')).toEqual(['owl']);
    expect(await list('model=delta')).toEqual(['gull', 'owl']);
    expect(await list('model=delta&status=partial')).toEqual(['gull']);
    expect(await list('model=nope')).toEqual([]);
    // A day as `to` runs through its end; `from` is inclusive.
    expect(await list('from=2026-11-18&to=2026-11-19')).toEqual(['pier', 'gull']);
    expect(await list('from=2026-11-20T00:00:00Z')).toEqual(['fox']);
    expect(await list('to=2026-11-15T12:00:00Z')).toEqual([]);
    expect(await list('to=2026-11-15T12:00:00.001Z')).toEqual(['owl']);
  });

  it('searches note and prompts for text, any case, with LIKE wildcards and quotes taken literally', async () => {
    expect(await list('q=fox')).toEqual(['fox']);
    expect(await list('q=lighthouse')).toEqual(['gull']);
    expect(await list('q=WINTER')).toEqual(['fox']);
    expect(await list('q=pier')).toEqual(['pier']);
    expect(await list(`q=${encodeURIComponent('"quoted"')}`)).toEqual(['pier']);
    expect(await list(`q=${encodeURIComponent('100%_s')}`)).toEqual(['pier']);
    expect(await list(`q=${encodeURIComponent('%')}`)).toEqual(['pier']);
    expect(await list(`q=${encodeURIComponent('_')}`)).toEqual(['pier']);
    expect(await list('q=a&model=delta&status=running')).toEqual(['owl']);
    expect(await list('q=zebra')).toEqual([]);
  });

  it('pages a filtered list by cursor', async () => {
    const first = await t.http.get('/v1/dashboard/batches?model=delta&limit=1').set(bearer(token)).expect(200);
    expect(first.body.batches.map((b: { id: string }) => b.id)).toEqual([ids.gull]);
    const next = await t.http
      .get(`/v1/dashboard/batches?model=delta&limit=1&cursor=${first.body.nextCursor}`)
      .set(bearer(token))
      .expect(200);
    expect(next.body.batches.map((b: { id: string }) => b.id)).toEqual([ids.owl]);
    expect(next.body.nextCursor).toBeNull();
  });

  it.each([
    ['status=done', 'status', 'not_a_status'],
    ['status=failed,', 'status', 'not_a_status'],
    ['status=failed&status=running', 'status', 'not_a_status'],
    ['model=Bad%20Model', 'model', 'not_a_model_key'],
    ['from=yesterday', 'from', 'not_a_date'],
    ['from=2026-02-30', 'from', 'not_a_date'],
    ['to=2026-11-20T10:00:00', 'to', 'not_a_date'],
    ['from=2026-11-20&to=2026-11-19', 'to', 'before_from'],
    ['q=%20%20', 'q', 'out_of_range'],
    [`q=${'x'.repeat(201)}`, 'q', 'out_of_range'],
    ['q[a]=b', 'q', 'out_of_range'],
  ])('%s -> 400 invalid_request naming the field', async (query, field, reason) => {
    const res = await t.http.get(`/v1/dashboard/batches?${query}`).set(bearer(token));
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 400, code: 'invalid_request' });
    // A repeated or bracketed parameter is refused by the query's validation, which names it as sent.
    if (query.includes('&status=') || query.startsWith('q[')) expect(res.body.error.details.field).toMatch(new RegExp(`^${field}`));
    else expect(res.body.error.details).toEqual({ field, reason });
  });

  it("the text search expressions are the trigram indexes' (the planner can read them), the status filter its index", async () => {
    const plan = async (where: string, params: unknown[], account = true) => {
      const runner = t.db.createQueryRunner();
      try {
        await runner.startTransaction();
        await runner.query('SET LOCAL enable_seqscan = off');
        const sql = account
          ? `EXPLAIN SELECT id FROM batches b WHERE b.account_id = $1 AND ${where}`
          : `EXPLAIN SELECT id FROM batches b WHERE ${where}`;
        const rows = await runner.query(sql, account ? [accountId, ...params] : params);
        await runner.rollbackTransaction();
        return rows.map((r: Record<string, string>) => r['QUERY PLAN']).join('\n');
      } finally {
        await runner.release();
      }
    };
    expect(await plan(`lower(b.prompts::text) LIKE lower($1)`, ['%lighthouse%'], false)).toContain('batches_prompts_trgm_idx');
    expect(await plan(`lower(b.note) LIKE lower($1)`, ['%lighthouse%'], false)).toContain('batches_note_trgm_idx');
    expect(await plan(`b.status IN ($2) ORDER BY b.created_at DESC, b.id DESC LIMIT 20`, ['failed'])).toContain(
      'batches_account_status_created_idx',
    );
  });

  it('usage: the batches of the window per key and model (images ordered and made, credits charged and refunded)', async () => {
    await t.db.query(`UPDATE batches SET succeeded_count = 1, credits_refunded = 1 WHERE id = $1`, [ids.pier]);
    const res = await t.http.get('/v1/dashboard/usage?days=30').set(bearer(token)).expect(200);
    expect(res.body.byKeyAndModel).toEqual([
      { keyId: null, model: 'delta', batches: 2, ordered: 2, succeeded: 0, charged: 8, refunded: 0 },
      { keyId: null, model: 'eta-image', batches: 2, ordered: 3, succeeded: 1, charged: 3, refunded: 1 },
    ]);
    // A window that ends before them has none.
    await t.db.query(`UPDATE batches SET created_at = now() - interval '40 days' WHERE account_id = $1`, [accountId]);
    expect((await t.http.get('/v1/dashboard/usage?days=30').set(bearer(token)).expect(200)).body.byKeyAndModel).toEqual([]);
  });
});
