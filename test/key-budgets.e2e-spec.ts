import { TestAccount, TestApp, getJson, postBatch } from '@app/testing';
import { periodResetsAt, periodStart } from '@app/billing';
import { bootBatchesApp } from './helpers/apps';

/** Per-key budgets and models allowlists (docs/billing.md#per-key-budgets). */
describe('Per-key budgets', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootBatchesApp();
  });
  afterAll(() => t.close());

  /** A second key of the account, made by the operator with the body given. */
  async function key(a: TestAccount, body: Record<string, unknown>): Promise<TestAccount & { dto: any }> {
    const res = await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send(body).expect(201);
    return { ...a, key: res.body.secret, keyId: res.body.key.id, dto: res.body.key };
  }

  /** A batch of `credits` images of eta-image (1 credit each). */
  const batchOf = (credits: number, tag = '') => ({
    prompts: Array.from({ length: credits }, (_, i) => `p${i}${tag}`),
    model: 'eta-image',
  });

  const tally = (results: { status: number; body: any }[]) => {
    const out: Record<string, number> = {};
    for (const r of results) {
      const k = r.status === 201 ? '201' : `${r.status} ${r.body.error?.code}`;
      out[k] = (out[k] ?? 0) + 1;
    }
    return out;
  };

  async function spentByKey(keyId: string): Promise<number> {
    const [row] = await t.db.query(
      `SELECT COALESCE(-SUM(amount), 0)::int AS s FROM ledger_entries
        WHERE api_key_id = $1 AND kind IN ('batch_charge', 'task_refund', 'cancel_refund')`,
      [keyId],
    );
    return row.s;
  }

  it('50 racing creates through two keys of one account: neither key spends past its budget; balance == ledger', async () => {
    const a = await t.account({ plan: 'scale', credits: 1000 });
    const weekly = await key(a, { name: 'weekly', budget: { credits: 20, period: 'week' } });
    const monthly = await key(a, { name: 'monthly', budget: { credits: 25, period: 'month' } });
    // 3 credits each: 6 fit under 20 (18), 8 under 25 (24); 14 batches stay under the plan's 20 at once.
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => postBatch(t, i % 2 ? monthly : weekly, batchOf(3, `-${i}`))));
    expect(tally(results.filter((_, i) => i % 2 === 0))).toEqual({ '201': 6, '403 key_budget_exceeded': 19 });
    expect(tally(results.filter((_, i) => i % 2 === 1))).toEqual({ '201': 8, '403 key_budget_exceeded': 17 });
    const refused = results.find((r, i) => i % 2 === 0 && r.status === 403);
    expect(refused?.body.error.details).toEqual({
      budget: 20,
      spent: 18,
      required: 3,
      period: 'week',
      resetsAt: periodResetsAt('week'),
    });
    expect(await spentByKey(weekly.keyId)).toBe(18);
    expect(await spentByKey(monthly.keyId)).toBe(24);
    expect(await t.balance(a.id)).toBe(1000 - 42);
    expect(await t.ledgerSum(a.id)).toBe(1000 - 42);

    const support = await t.admin('get', `/v1/admin/keys/${weekly.keyId}`).expect(200);
    expect(JSON.stringify(support.body)).toContain('"budget":{"credits":20,"period":"week","spent":18');
    const me = await getJson(t, monthly, '/v1/me').expect(200);
    expect(me.body.key).toMatchObject({
      creditCapPerDay: null,
      budget: { credits: 25, period: 'month', spent: 24, resetsAt: periodResetsAt('month') },
      models: [],
    });
  });

  it('a refund gives the budget back: a cancelled batch frees its credits for the next create', async () => {
    const a = await t.account({ plan: 'scale', credits: 100 });
    const k = await key(a, { budget: { credits: 10, period: 'day' } });
    const first = await postBatch(t, k, batchOf(6)).expect(201);
    await postBatch(t, k, batchOf(6)).expect(403);
    await t.http.post(`/v1/batches/${first.body.id}/cancel`).set('Authorization', `Bearer ${k.key}`).expect(200);
    expect(await spentByKey(k.keyId)).toBe(0);
    await postBatch(t, k, batchOf(6)).expect(201);
    expect(await t.balance(a.id)).toBe(await t.ledgerSum(a.id));
  });

  it('a refused create changes nothing, and the estimate reports the same refusal', async () => {
    const a = await t.account({ plan: 'scale', credits: 100 });
    const k = await key(a, { budget: { credits: 4, period: 'month' } });
    const res = await postBatch(t, k, batchOf(5)).expect(403);
    expect(res.body.error.code).toBe('key_budget_exceeded');
    expect(await t.balance(a.id)).toBe(100);
    expect(await t.ledgerSum(a.id)).toBe(100);
    const est = await t.http.post('/v1/batches/estimate').set('Authorization', `Bearer ${k.key}`).send(batchOf(5)).expect(200);
    expect(est.body).toMatchObject({ wouldCreate: false, refusal: { code: 'key_budget_exceeded' } });
  });

  it('a model outside the allowlist -> 403 model_not_allowed; an allowed one passes; [] allows every model', async () => {
    const a = await t.account({ plan: 'scale', credits: 100 });
    const k = await key(a, { models: ['beta-2'] });
    expect(k.dto.models).toEqual(['beta-2']);
    const res = await postBatch(t, k, batchOf(1)).expect(403);
    expect(res.body.error).toMatchObject({ code: 'model_not_allowed', details: { model: 'eta-image', allowed: ['beta-2'] } });
    expect(await t.balance(a.id)).toBe(100);
    await postBatch(t, k, { prompts: ['a'], model: 'beta-2' }).expect(201);
    const everyModel = await key(a, { models: [] });
    await postBatch(t, everyModel, batchOf(1)).expect(201);
  });

  it('creditCapPerDay is the day budget in its v1 spelling: it reads from a day budget, writing one clears the other', async () => {
    const a = await t.account({ plan: 'scale', credits: 100 });
    const day = await key(a, { budget: { credits: 7, period: 'day' } });
    expect(day.dto).toMatchObject({ creditCapPerDay: 7, budget: { credits: 7, period: 'day', spent: 0 } });
    const week = await key(a, { budget: { credits: 7, period: 'week' } });
    expect(week.dto).toMatchObject({ creditCapPerDay: null, budget: { credits: 7, period: 'week' } });
    // The v1 spelling keeps v1's refusal.
    const v1 = await key(a, { creditCapPerDay: 2 });
    expect(v1.dto).toMatchObject({ creditCapPerDay: 2, budget: { credits: 2, period: 'day' } });
    const refused = await postBatch(t, v1, batchOf(3)).expect(402);
    expect(refused.body.error).toMatchObject({
      code: 'daily_credit_cap_exceeded',
      details: { cap: 2, used: 0, required: 3, resetsAt: periodResetsAt('day') },
    });
    const both = await t
      .admin('post', `/v1/admin/accounts/${a.id}/keys`)
      .send({ creditCapPerDay: 2, budget: { credits: 2, period: 'day' } });
    expect(both.status).toBe(400);
    expect(both.body.error).toMatchObject({
      code: 'invalid_request',
      details: { field: 'budget', reason: 'conflicts_with_creditCapPerDay' },
    });
  });

  it.each([
    [{ budget: { credits: 0, period: 'day' } }, 'budget.credits'],
    [{ budget: { credits: 5, period: 'year' } }, 'budget.period'],
    [{ budget: { credits: 5 } }, 'budget.period'],
    [{ budget: 5 }, 'budget'],
    [{ models: 'beta-2' }, 'models'],
    [{ models: [' beta'] }, 'models'],
    [{ models: ['beta-2', 'beta-2-typo'] }, 'models'],
  ])('bad budget or models %j -> 400 invalid_request naming %s, no key made', async (body, field) => {
    const a = await t.account({ plan: 'scale', credits: 1 });
    const res = await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send(body);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('invalid_request');
    expect(String(res.body.error.details.field)).toMatch(new RegExp(`^${field.replace('.', '\\.')}`));
    const [{ n }] = await t.db.query(`SELECT count(*)::int AS n FROM api_keys WHERE account_id = $1`, [a.id]);
    expect(n).toBe(1);
  });

  it('an allowlist naming a model the catalog does not have -> 400 unknown_model listing it once; no key made', async () => {
    const a = await t.account({ plan: 'scale', credits: 1 });
    const made = await t.admin('post', `/v1/admin/accounts/${a.id}/keys`).send({ models: ['beta-2', 'alpha-imgae-2', 'alpha-imgae-2'] });
    expect(made.status).toBe(400);
    expect(made.body.error).toMatchObject({
      code: 'invalid_request',
      details: { field: 'models', reason: 'unknown_model', unknown: ['alpha-imgae-2'] },
    });
    const [{ n }] = await t.db.query(`SELECT count(*)::int AS n FROM api_keys WHERE account_id = $1`, [a.id]);
    expect(n).toBe(1);
  });

  it('UTC calendar periods: a day from 00:00, a week from Monday 00:00, a month from the 1st', () => {
    const at = new Date('2026-11-28T23:59:59.999Z'); // a Saturday
    expect(periodStart('day', at).toISOString()).toBe('2026-11-28T00:00:00.000Z');
    expect(periodStart('week', at).toISOString()).toBe('2026-11-23T00:00:00.000Z');
    expect(periodStart('month', at).toISOString()).toBe('2026-11-01T00:00:00.000Z');
    expect(new Date(periodResetsAt('week', at)).toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(new Date(periodResetsAt('month', at)).toISOString()).toBe('2026-12-01T00:00:00.000Z');
    expect(periodStart('week', new Date('2026-11-30T00:00:00Z')).toISOString()).toBe('2026-11-30T00:00:00.000Z');
    expect(periodStart('week', new Date('2026-11-29T12:00:00Z')).toISOString()).toBe('2026-11-23T00:00:00.000Z');
  });
});
