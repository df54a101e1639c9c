import { BatchesService } from '@app/batches';
import { TestApp, batchCount, getJson, postBatch } from '@app/testing';
import { bootBatchesApp } from './helpers/apps';

/** Money and plan limits when one account fires many creations at once (docs/credits.md#guarantees). */
describe('Batches under concurrency', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootBatchesApp();
  });
  afterAll(() => t.close());

  const statuses = (results: { status: number; body: any }[]) => {
    const tally: Record<string, number> = {};
    for (const r of results) {
      const k = r.status === 201 ? '201' : `${r.status} ${r.body.error?.code}`;
      tally[k] = (tally[k] ?? 0) + 1;
    }
    return tally;
  };

  async function ledgerMin(accountId: string): Promise<number> {
    const [row] = await t.db.query(`SELECT min(balance_after) AS m FROM ledger_entries WHERE account_id = $1`, [accountId]);
    return Number(row.m);
  }

  it('20 parallel creates against a balance for 7: exactly 7 succeed, never below zero, balance = ledger', async () => {
    // 5 credits each (eta-image, 5 prompts); 37 credits pay for 7 with 2 left over.
    const a = await t.account({ plan: 'scale', credits: 37 });
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => postBatch(t, a, { prompts: ['a', 'b', 'c', 'd', `e${i}`], model: 'eta-image' })),
    );
    expect(statuses(results)).toEqual({ '201': 7, '402 insufficient_credits': 13 });
    for (const r of results.filter((x) => x.status === 402)) {
      expect(r.body.error.details).toEqual({ required: 5, balance: 2 });
    }
    expect(await t.balance(a.id)).toBe(2);
    expect(await t.ledgerSum(a.id)).toBe(2);
    expect(await ledgerMin(a.id)).toBeGreaterThanOrEqual(0);
    expect(await batchCount(t, a.id)).toBe(7);
    const [tasks] = await t.db.query(`SELECT count(*)::int AS n FROM tasks WHERE account_id = $1`, [a.id]);
    expect(tasks.n).toBe(35);
    const [charges] = await t.db.query(
      `SELECT count(*)::int AS n, sum(amount)::int AS s FROM ledger_entries WHERE account_id = $1 AND kind = 'batch_charge'`,
      [a.id],
    );
    expect(charges).toEqual({ n: 7, s: -35 });
  });

  it('the concurrency limit holds under parallel creates: exactly the free slots are taken', async () => {
    const a = await t.account({ plan: 'starter', credits: 100 });
    const results = await Promise.all(Array.from({ length: 8 }, () => postBatch(t, a, { prompts: ['a'], model: 'eta-image' })));
    expect(statuses(results)).toEqual({ '201': 1, '403 concurrent_limit_exceeded': 7 });
    for (const r of results.filter((x) => x.status === 403)) expect(r.body.error.details).toEqual({ active: 1, max: 1 });
    expect(await t.balance(a.id)).toBe(99);
    expect(await batchCount(t, a.id)).toBe(1);
  });

  it("the key's daily cap holds under parallel creates", async () => {
    const a = await t.account({ plan: 'scale', credits: 1000, creditCapPerDay: 22 });
    // 5 credits each: 4 fit under 22 (20), the 5th would make 25.
    const results = await Promise.all(
      Array.from({ length: 10 }, () => postBatch(t, a, { prompts: ['a', 'b', 'c', 'd', 'e'], model: 'eta-image' })),
    );
    expect(statuses(results)).toEqual({ '201': 4, '402 daily_credit_cap_exceeded': 6 });
    for (const r of results.filter((x) => x.status === 402)) {
      expect(r.body.error.details).toMatchObject({ cap: 22, used: 20, required: 5 });
    }
    expect(await t.balance(a.id)).toBe(980);
    expect(await t.ledgerSum(a.id)).toBe(980);
    const me = await getJson(t, a, '/v1/me').expect(200);
    expect(me.body.key.creditsUsedToday).toBe(20);
    expect(me.body.limits.activeBatches).toBe(4);
  });

  it('mixed: balance, cap and concurrency limits racing together never overdraw', async () => {
    const a = await t.account({ plan: 'studio', credits: 64, creditCapPerDay: 50 });
    const bodies = Array.from({ length: 16 }, (_, i) => ({ prompts: Array(1 + (i % 4)).fill('p'), model: 'beta-2' }));
    const results = await Promise.all(bodies.map((b) => postBatch(t, a, b)));
    const ok = results.filter((r) => r.status === 201);
    const charged = ok.reduce((s, r) => s + r.body.creditsCharged, 0);
    expect(charged).toBeLessThanOrEqual(50);
    expect(ok.length).toBeLessThanOrEqual(10);
    expect(await t.balance(a.id)).toBe(64 - charged);
    expect(await t.ledgerSum(a.id)).toBe(64 - charged);
    expect(await ledgerMin(a.id)).toBeGreaterThanOrEqual(0);
    for (const r of results.filter((x) => x.status !== 201)) {
      expect(['insufficient_credits', 'daily_credit_cap_exceeded', 'concurrent_limit_exceeded']).toContain(r.body.error.code);
    }
  });

  it('the dashboard path (no key) charges the account, skips key caps and is not createdViaApi', async () => {
    const a = await t.account({ credits: 50, creditCapPerDay: 1 });
    const batches = t.app.get(BatchesService);
    const batch = await batches.create({ accountId: a.id, apiKeyId: null, via: 'dashboard' }, { prompts: ['a', 'b'], model: 'beta-2' });
    expect(batch).toMatchObject({ total: 2, creditsCharged: 8, createdViaApi: false, apiKeyId: null, status: 'pending' });
    expect(await t.balance(a.id)).toBe(42);
    const detail = await batches.detail(a.id, batch.id);
    expect(detail.batch).toMatchObject({ id: batch.id, done: false, counts: { pending: 2, running: 0, succeeded: 0, failed: 0 } });
    expect(detail.tasks.map((x) => x.seq)).toEqual([0, 1]);
    const api = await getJson(t, a, `/v1/batches/${batch.id}`).expect(200);
    expect(api.body.batch.createdViaApi).toBe(false);
    expect((await getJson(t, a, '/v1/me').expect(200)).body.key.creditsUsedToday).toBe(0);
  });
});
