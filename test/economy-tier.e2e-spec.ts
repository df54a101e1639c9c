import { randomUUID } from 'node:crypto';
import { BatchesService } from '@app/batches';
import {
  bearer,
  batchCount,
  batchRow,
  fileEnvironment,
  FileEnvironment,
  getJson,
  postBatch,
  taskRows,
  TestAccount,
  TestApp,
} from '@app/testing';
import { bootApi } from './helpers/apps';

const HOUR_MS = 3_600_000;
/** A route that runs upstream batches: the simulated type's local batch API (docs/admin.md#economy-tier). */
const BATCH_ROUTE = { type: 'simulated', batch: { enabled: true } };

/**
 * v1.2 section 4, the API side of the economy tier: economy prices and window in the catalog
 * and the admin API, `tier` on create and estimate with tier_not_available, the batch's tier
 * and expiresAt, the plan's separate cap on economy batches (also under parallel creates),
 * and cancel (tasks not yet in an upstream batch cancelled and refunded, submitted ones run
 * on). No generator runs here: economy tasks wait `pending` for a collector, and the test
 * stands in for it with SQL where it needs a task submitted. Its own database, since it
 * edits seeded models and plans.
 */
describe('economy tier: catalog, create, plan limits and cancel', () => {
  let env: FileEnvironment;
  let t: TestApp;

  beforeAll(async () => {
    env = await fileEnvironment('economy_tier');
    t = await bootApi(env.config);
    // gamma-5-pro: 1K 6, 2K 12, no 4K. Economy at 1K only.
    await t
      .admin('patch', '/v1/admin/models/gamma-5-pro')
      .send({ provider: BATCH_ROUTE, economyCreditCost: { '1K': 3 }, economyWindowHours: 24 })
      .expect(200);
  });
  afterAll(async () => {
    await t?.close();
    await env?.teardown();
  });

  const adminModel = async (key: string) =>
    ((await t.admin('get', '/v1/admin/models').expect(200)).body.models as Record<string, any>[]).find((m) => m.key === key)!;
  const publicModel = async (a: TestAccount, key: string) =>
    ((await getJson(t, a, '/v1/models').expect(200)).body.models as Record<string, any>[]).find((m) => m.key === key)!;
  const patchModel = (key: string, body: Record<string, unknown>) => t.admin('patch', `/v1/admin/models/${key}`).send(body);
  const estimate = (a: TestAccount, body: Record<string, unknown>) =>
    t.http.post('/v1/batches/estimate').set('Authorization', bearer(a)).send(body);
  const cancel = (a: TestAccount, id: string) => t.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a));
  const ledgerKinds = async (batchId: string): Promise<{ kind: string; amount: string }[]> =>
    t.db.query(`SELECT kind, amount FROM ledger_entries WHERE batch_id = $1 ORDER BY id`, [batchId]);
  const tally = (results: { status: number; body: any }[]) => {
    const out: Record<string, number> = {};
    for (const r of results) {
      const k = r.status === 201 ? '201' : `${r.status} ${r.body.error?.code}`;
      out[k] = (out[k] ?? 0) + 1;
    }
    return out;
  };

  describe('the catalog and the admin model API', () => {
    it('GET /v1/models shows both prices and the window of a model with an economy tier, null for the others', async () => {
      const a = await t.account({ credits: 0 });
      expect(await publicModel(a, 'gamma-5-pro')).toMatchObject({
        creditCost: { '1K': 6, '2K': 12 },
        economyCreditCost: { '1K': 3 },
        economyWindowHours: 24,
      });
      expect(await publicModel(a, 'beta-2')).toMatchObject({ economyCreditCost: null, economyWindowHours: null });
      expect(await adminModel('gamma-5-pro')).toMatchObject({
        economyCreditCost: { '1K': 3 },
        economyWindowHours: 24,
        provider: { type: 'simulated', batch: { enabled: true } },
      });
    });

    it.each([
      [
        'a resolution not priced at standard',
        { economyCreditCost: { '1K': 2, '4K': 5 } },
        'economyCreditCost.4K',
        'not_priced_at_standard',
      ],
      ['an unknown resolution', { economyCreditCost: { '8K': 5 } }, 'economyCreditCost.8K', 'unknown_resolution'],
      ['a zero price', { economyCreditCost: { '1K': 0 } }, 'economyCreditCost.1K', 'not_a_positive_integer'],
      ['a fractional price', { economyCreditCost: { '1K': 1.5 } }, 'economyCreditCost.1K', 'not_a_positive_integer'],
      ['a price given as text', { economyCreditCost: { '1K': '2' } }, 'economyCreditCost.1K', 'not_a_positive_integer'],
      ['a price over the ceiling', { economyCreditCost: { '1K': 10_001 } }, 'economyCreditCost.1K', 'out_of_range'],
      ['no price at all', { economyCreditCost: {} }, 'economyCreditCost', 'empty'],
      ['prices as a list', { economyCreditCost: [3] }, 'economyCreditCost', 'isObject'],
      ['a window of 0 hours', { economyWindowHours: 0 }, 'economyWindowHours', 'min'],
      ['a window over a week', { economyWindowHours: 169 }, 'economyWindowHours', 'max'],
      ['a fractional window', { economyWindowHours: 1.5 }, 'economyWindowHours', 'isInt'],
      ['a window given as text', { economyWindowHours: '24' }, 'economyWindowHours', 'isInt'],
      ['prices without a window', { economyWindowHours: null }, 'economyWindowHours', 'required'],
      [
        'a route that drops batch while economy is priced',
        { provider: { type: 'simulated' } },
        'provider.batch',
        'required_by_economy_tier',
      ],
      [
        'a route with batch turned off',
        { provider: { type: 'simulated', batch: { enabled: false } } },
        'provider.batch',
        'required_by_economy_tier',
      ],
      [
        'a standard price list that drops an economy resolution',
        { creditCost: { '2K': 12 }, resolutionsByRatio: { '1:1': ['2K'] } },
        'economyCreditCost.1K',
        'not_priced_at_standard',
      ],
    ])('PATCH refuses %s with invalid_request naming the field, and changes nothing', async (_what, body, field, reason) => {
      const before = await adminModel('gamma-5-pro');
      const res = await patchModel('gamma-5-pro', body).expect(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field, reason } });
      expect(await adminModel('gamma-5-pro')).toEqual(before);
    });

    it('economy prices on a route that does not run batches are refused, naming economyCreditCost and provider.batch', async () => {
      const before = await adminModel('beta-2');
      const res = await patchModel('beta-2', { economyCreditCost: { '1K': 2 }, economyWindowHours: 24 }).expect(400);
      expect(res.body.error.details).toEqual({ field: 'economyCreditCost', reason: 'route_batch_not_enabled' });
      expect(res.body.error.message).toContain('provider.batch');
      expect(await adminModel('beta-2')).toEqual(before);
    });

    it('a batch setting on a route type without a batch API (builtin) does not enable economy prices', async () => {
      const before = await adminModel('beta-2');
      const res = await patchModel('beta-2', {
        provider: { type: 'builtin', batch: { enabled: true } },
        economyCreditCost: { '1K': 2 },
        economyWindowHours: 24,
      }).expect(400);
      expect(res.body.error.details).toEqual({ field: 'economyCreditCost', reason: 'route_batch_not_enabled' });
      expect(await adminModel('beta-2')).toEqual(before);
    });

    it('enables, edits and clears the economy tier of a model; the window stays stored but is not offered without prices', async () => {
      const a = await t.account({ credits: 0 });
      const on = await patchModel('beta-2', {
        provider: BATCH_ROUTE,
        economyCreditCost: { '1K': 2, '2K': 3 },
        economyWindowHours: 12,
      }).expect(200);
      expect(on.body.model).toMatchObject({ economyCreditCost: { '1K': 2, '2K': 3 }, economyWindowHours: 12 });
      expect(await publicModel(a, 'beta-2')).toMatchObject({ economyCreditCost: { '1K': 2, '2K': 3 }, economyWindowHours: 12 });

      await patchModel('beta-2', { economyWindowHours: 48 }).expect(200);
      expect(await publicModel(a, 'beta-2')).toMatchObject({ economyWindowHours: 48 });

      const off = await patchModel('beta-2', { economyCreditCost: null }).expect(200);
      expect(off.body.model).toMatchObject({ economyCreditCost: null, economyWindowHours: 48 });
      expect(await publicModel(a, 'beta-2')).toMatchObject({ economyCreditCost: null, economyWindowHours: null });
      // With no economy prices left, the route may drop its batch setting.
      await patchModel('beta-2', { provider: { type: 'builtin' } }).expect(200);
      const res = await postBatch(t, a, { model: 'beta-2', prompts: ['x'], tier: 'economy' }).expect(400);
      expect(res.body.error.code).toBe('tier_not_available');
    });

    it('a route edited outside the admin API (batch off) offers no economy tier, whatever the stored prices', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      await patchModel('beta-2-1', { provider: BATCH_ROUTE, economyCreditCost: { '1K': 2 }, economyWindowHours: 24 }).expect(200);
      await t.db.query(`UPDATE models SET provider = '{"type":"simulated","batch":{"enabled":false}}' WHERE key = 'beta-2-1'`);
      expect(await publicModel(a, 'beta-2-1')).toMatchObject({ economyCreditCost: null, economyWindowHours: null });
      const res = await postBatch(t, a, { model: 'beta-2-1', prompts: ['x'], tier: 'economy' }).expect(400);
      expect(res.body.error).toMatchObject({ code: 'tier_not_available', details: { model: 'beta-2-1', tier: 'economy' } });
      expect(await t.balance(a.id)).toBe(100);
    });

    it('POST /v1/admin/models creates a model with an economy tier, and refuses one whose route runs no batches', async () => {
      const a = await t.account({ credits: 0 });
      const created = await t
        .admin('post', '/v1/admin/models')
        .send({
          key: 'eco-flash',
          displayName: 'Eco Flash',
          creditCost: { '1K': 4 },
          economyCreditCost: { '1K': 2 },
          economyWindowHours: 24,
          resolutionsByRatio: { '1:1': ['1K'] },
          provider: BATCH_ROUTE,
        })
        .expect(201);
      expect(created.body.model).toMatchObject({ economyCreditCost: { '1K': 2 }, economyWindowHours: 24 });
      expect(await publicModel(a, 'eco-flash')).toMatchObject({
        creditCost: { '1K': 4 },
        economyCreditCost: { '1K': 2 },
        economyWindowHours: 24,
      });

      const refused = await t
        .admin('post', '/v1/admin/models')
        .send({
          key: 'eco-builtin',
          displayName: 'Eco Builtin',
          creditCost: { '1K': 4 },
          economyCreditCost: { '1K': 2 },
          economyWindowHours: 24,
          resolutionsByRatio: { '1:1': ['1K'] },
        })
        .expect(400);
      expect(refused.body.error.details).toEqual({ field: 'economyCreditCost', reason: 'route_batch_not_enabled' });
      expect(await publicModel(a, 'eco-builtin')).toBeUndefined();
    });
  });

  describe('POST /v1/batches and the estimate with a tier', () => {
    it.each([
      ['an unknown tier', 'premium'],
      ['a number', 1],
      ['another case', 'Economy'],
    ])('refuses %s as tier with invalid_request naming the field, charging nothing', async (_what, tier) => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const res = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['x'], tier }).expect(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'tier' } });
      expect(await t.balance(a.id)).toBe(100);
      expect(await batchCount(t, a.id)).toBe(0);
      expect((await estimate(a, { model: 'gamma-5-pro', prompts: ['x'], tier })).body.error.details.field).toBe('tier');
    });

    it('economy on a model without it: 400 tier_not_available, nothing charged or written', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const res = await postBatch(t, a, { model: 'alpha-image-2', prompts: ['x'], tier: 'economy' }).expect(400);
      expect(res.body.error).toEqual({
        code: 'tier_not_available',
        message: expect.stringContaining('alpha-image-2'),
        details: { model: 'alpha-image-2', tier: 'economy' },
      });
      expect(await t.balance(a.id)).toBe(100);
      expect(await t.ledgerSum(a.id)).toBe(100);
      expect(await batchCount(t, a.id)).toBe(0);
      // The standard tier of the same model is still there.
      await postBatch(t, a, { model: 'alpha-image-2', prompts: ['x'], tier: 'standard' }).expect(201);
    });

    it('economy at a resolution the model prices only at standard: tier_not_available naming what it offers; size comes first', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const res = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['x'], resolution: '2K', tier: 'economy' }).expect(400);
      expect(res.body.error).toMatchObject({
        code: 'tier_not_available',
        details: { model: 'gamma-5-pro', tier: 'economy', resolution: '2K', economyResolutions: ['1K'] },
      });
      // An illegal size is size_not_allowed, whatever the tier (step 4 before the tier).
      const size = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['x'], resolution: '4K', tier: 'economy' }).expect(400);
      expect(size.body.error.code).toBe('size_not_allowed');
      expect((await estimate(a, { model: 'gamma-5-pro', prompts: ['x'], resolution: '2K', tier: 'economy' })).body.error.code).toBe(
        'tier_not_available',
      );
      expect(await t.balance(a.id)).toBe(100);
      expect(await batchCount(t, a.id)).toBe(0);
    });

    it('an economy batch: charged total x economyCreditCost, tier and expiresAt (createdAt + the window), every task pending with tier economy and no upstream batch', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const body = { model: 'gamma-5-pro', prompts: ['a', 'b', 'c'], countPerCombo: 2, tier: 'economy' };
      const created = await postBatch(t, a, body).expect(201);
      expect(created.body).toEqual({ id: expect.any(String), total: 6, creditsCharged: 18, status: 'pending', tier: 'economy' });
      expect(await t.balance(a.id)).toBe(82);
      expect(await t.ledgerSum(a.id)).toBe(82);

      const { batch, tasks } = (await getJson(t, a, `/v1/batches/${created.body.id}`).expect(200)).body;
      expect(batch).toMatchObject({ tier: 'economy', creditsCharged: 18, status: 'pending', done: false, counts: { pending: 6 } });
      expect(batch.expiresAt).toBe(batch.createdAt + 24 * HOUR_MS);
      expect(tasks.map((x: { status: string }) => x.status)).toEqual(Array(6).fill('pending'));

      const row = await batchRow(t, created.body.id);
      expect(row).toMatchObject({ tier: 'economy', unit_cost: 3 });
      const rows = await taskRows(t, created.body.id);
      // None queued for the standard feeder's workers: every one waits for the collector.
      expect(rows.map((r) => [r.status, r.tier, r.upstream_batch_id])).toEqual(Array(6).fill(['pending', 'economy', null]));

      // The list and the batch object carry the same fields.
      const listed = (await getJson(t, a, '/v1/batches').expect(200)).body.batches[0];
      expect(listed).toMatchObject({ id: created.body.id, tier: 'economy', expiresAt: batch.expiresAt });
    });

    it('a standard batch (tier omitted or given): tier standard, expiresAt null, tasks standard', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      for (const body of [
        { model: 'gamma-5-pro', prompts: ['a'] },
        { model: 'gamma-5-pro', prompts: ['a'], tier: 'standard' },
      ]) {
        const created = await postBatch(t, a, body).expect(201);
        expect(created.body.creditsCharged).toBe(6);
        const { batch } = (await getJson(t, a, `/v1/batches/${created.body.id}`).expect(200)).body;
        expect(batch).toMatchObject({ tier: 'standard', expiresAt: null });
        expect((await taskRows(t, created.body.id)).map((r) => r.tier)).toEqual(['standard']);
      }
      expect(await t.balance(a.id)).toBe(88);
    });

    it('the estimate prices the tier asked for', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const body = { model: 'gamma-5-pro', prompts: ['a', 'b'], countPerCombo: 2 };
      const standard = await estimate(a, body).expect(200);
      expect(standard.body).toMatchObject({ total: 4, tier: 'standard', creditCost: 6, creditsRequired: 24, wouldCreate: true });
      const economy = await estimate(a, { ...body, tier: 'economy' }).expect(200);
      expect(economy.body).toMatchObject({
        total: 4,
        tier: 'economy',
        creditCost: 3,
        creditsRequired: 12,
        balance: 100,
        wouldCreate: true,
        refusal: null,
      });
      expect(await batchCount(t, a.id)).toBe(0);
    });

    it('an Idempotency-Key replays an economy create, and refuses the same key for the standard tier', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const send = (body: Record<string, unknown>) =>
        t.http.post('/v1/batches').set('Authorization', bearer(a)).set('Idempotency-Key', 'eco-1').send(body);
      const first = await send({ model: 'gamma-5-pro', prompts: ['a'], tier: 'economy' }).expect(201);
      const again = await send({ model: 'gamma-5-pro', prompts: ['a'], tier: 'economy' }).expect(201);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.body).toEqual(first.body);
      const other = await send({ model: 'gamma-5-pro', prompts: ['a'], tier: 'standard' }).expect(422);
      expect(other.body.error.code).toBe('idempotency_key_reused');
      expect(await batchCount(t, a.id)).toBe(1);
      expect(await t.balance(a.id)).toBe(97);
    });

    it('the dashboard path takes the tier as well', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const batch = await t.app
        .get(BatchesService)
        .create({ accountId: a.id, apiKeyId: null, via: 'dashboard' }, { model: 'gamma-5-pro', prompts: ['a', 'b'], tier: 'economy' });
      expect(batch).toMatchObject({ tier: 'economy', creditsCharged: 6, windowHours: 24 });
      expect(batch.expiresAt!.getTime()).toBe(batch.createdAt.getTime() + 24 * HOUR_MS);
    });
  });

  describe('plan limits', () => {
    it('economy batches have their own cap: they neither use nor need a standard slot; over it 403 concurrent_limit_exceeded { tier: economy }', async () => {
      // starter: 1 standard, 2 economy.
      const a = await t.account({ plan: 'starter', credits: 100 });
      await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['s'] }).expect(201);
      const standardFull = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['s'] }).expect(403);
      expect(standardFull.body.error).toMatchObject({ code: 'concurrent_limit_exceeded', details: { active: 1, max: 1 } });

      await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['e'], tier: 'economy' }).expect(201);
      await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['e'], tier: 'economy' }).expect(201);
      const economyFull = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['e'], tier: 'economy' }).expect(403);
      expect(economyFull.body.error).toMatchObject({ code: 'concurrent_limit_exceeded', details: { tier: 'economy', active: 2, max: 2 } });

      const est = await estimate(a, { model: 'gamma-5-pro', prompts: ['e'], tier: 'economy' }).expect(200);
      expect(est.body).toMatchObject({
        wouldCreate: false,
        refusal: { code: 'concurrent_limit_exceeded', details: { tier: 'economy', active: 2, max: 2 } },
      });

      const me = (await getJson(t, a, '/v1/me').expect(200)).body;
      expect(me.limits).toEqual({
        maxImagesPerBatch: 10,
        maxConcurrentBatches: 1,
        activeBatches: 1,
        maxConcurrentEconomyBatches: 2,
        activeEconomyBatches: 2,
      });
      expect(await t.balance(a.id)).toBe(100 - 6 - 3 - 3);
      expect(await t.ledgerSum(a.id)).toBe(88);
    });

    it('maxImagesPerBatch holds on the economy tier too', async () => {
      const a = await t.account({ plan: 'starter', credits: 100 });
      const res = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['a', 'b', 'c', 'd'], countPerCombo: 3, tier: 'economy' }).expect(
        403,
      );
      expect(res.body.error).toMatchObject({ code: 'batch_limit_exceeded', details: { total: 12, max: 10 } });
    });

    it('the caps hold under parallel creates of both tiers: exactly the free slots of each are taken, money exact', async () => {
      const a = await t.account({ plan: 'starter', credits: 100 });
      const economy = Array.from({ length: 8 }, (_, i) => postBatch(t, a, { model: 'gamma-5-pro', prompts: [`e${i}`], tier: 'economy' }));
      const standard = Array.from({ length: 8 }, (_, i) => postBatch(t, a, { model: 'gamma-5-pro', prompts: [`s${i}`] }));
      const [eco, std] = await Promise.all([Promise.all(economy), Promise.all(standard)]);
      expect(tally(eco)).toEqual({ '201': 2, '403 concurrent_limit_exceeded': 6 });
      expect(tally(std)).toEqual({ '201': 1, '403 concurrent_limit_exceeded': 7 });
      for (const r of eco.filter((x) => x.status === 403)) expect(r.body.error.details).toEqual({ tier: 'economy', active: 2, max: 2 });
      for (const r of std.filter((x) => x.status === 403)) expect(r.body.error.details).toEqual({ active: 1, max: 1 });
      expect(await t.balance(a.id)).toBe(100 - 2 * 3 - 6);
      expect(await t.ledgerSum(a.id)).toBe(88);
      const [counts] = await t.db.query(
        `SELECT count(*) FILTER (WHERE tier = 'economy')::int AS economy, count(*) FILTER (WHERE tier = 'standard')::int AS standard FROM batches WHERE account_id = $1`,
        [a.id],
      );
      expect(counts).toEqual({ economy: 2, standard: 1 });
    });

    it('a plan without economy batches (free: 0) refuses every economy create; the admin plan API edits the cap', async () => {
      // A free account has no API keys: it creates batches from the dashboard.
      const email = `free-${randomUUID()}@example.test`;
      const a = (await t.admin('post', '/v1/admin/accounts').send({ email, plan: 'free', credits: 100 }).expect(201)).body.account as {
        id: string;
      };
      const batches = t.app.get(BatchesService);
      const dashboard = { accountId: a.id, apiKeyId: null, via: 'dashboard' as const };
      await expect(batches.create(dashboard, { model: 'gamma-5-pro', prompts: ['a'], tier: 'economy' })).rejects.toMatchObject({
        code: 'concurrent_limit_exceeded',
        details: { tier: 'economy', active: 0, max: 0 },
      });

      const plans = (await t.admin('get', '/v1/admin/plans').expect(200)).body.plans as {
        key: string;
        maxConcurrentEconomyBatches: number;
      }[];
      expect(Object.fromEntries(plans.map((p) => [p.key, p.maxConcurrentEconomyBatches]))).toEqual({
        free: 0,
        starter: 2,
        studio: 10,
        scale: 50,
      });
      const bad = await t.admin('patch', '/v1/admin/plans/free').send({ maxConcurrentEconomyBatches: -1 }).expect(400);
      expect(bad.body.error.details).toEqual({ field: 'maxConcurrentEconomyBatches', reason: 'min' });
      const edited = await t.admin('patch', '/v1/admin/plans/free').send({ maxConcurrentEconomyBatches: 1 }).expect(200);
      expect(edited.body.plan).toMatchObject({ key: 'free', maxConcurrentEconomyBatches: 1, maxConcurrentBatches: 1 });
      try {
        await expect(batches.create(dashboard, { model: 'gamma-5-pro', prompts: ['a'], tier: 'economy' })).resolves.toMatchObject({
          tier: 'economy',
        });
        expect(await t.balance(a.id)).toBe(97);
      } finally {
        await t.admin('patch', '/v1/admin/plans/free').send({ maxConcurrentEconomyBatches: 0 }).expect(200);
      }
    });
  });

  describe('cancel', () => {
    /** Stands in for the collector: the task goes into an upstream batch (status running, upstream_batch_id set). */
    const submit = async (taskIds: string[], sentAt: 'now()' | 'NULL') => {
      // tasks.upstream_batch_id references upstream_batches: a group row first (due in a day: no collector takes it).
      const [{ id: group }] = await t.db.query(
        `INSERT INTO upstream_batches (model, provider, lines, state, poll_at) VALUES ('gamma-5-pro', '{}'::jsonb, $1, 'created', now() + interval '1 day') RETURNING id`,
        [taskIds.length],
      );
      await t.db.query(
        `UPDATE tasks SET status = 'running', upstream_batch_id = $2, sent_at = ${sentAt}, updated_at = now() WHERE id = ANY($1::uuid[])`,
        [taskIds, group],
      );
    };

    it('cancels and refunds the tasks not yet in an upstream batch, once; the submitted ones run on', async () => {
      const a = await t.account({ plan: 'studio', credits: 100 });
      const created = await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['a', 'b', 'c', 'd', 'e'], tier: 'economy' }).expect(201);
      const id = created.body.id as string;
      expect(await t.balance(a.id)).toBe(85);
      const rows = await taskRows(t, id);
      // Two submitted: one the collector marked sent, one it did not (upstream_batch_id alone decides).
      await submit([rows[0].id], 'now()');
      await submit([rows[1].id], 'NULL');

      const res = await cancel(a, id).expect(200);
      expect(res.body).toMatchObject({
        id,
        tier: 'economy',
        done: false,
        // Both in an upstream batch: running, whether or not the collector set sent_at.
        counts: { pending: 0, running: 2, cancelled: 3 },
        creditsCharged: 15,
        creditsRefunded: 9,
      });
      expect(typeof res.body.cancelledAt).toBe('number');
      const after = await taskRows(t, id);
      expect(after.map((r) => r.status)).toEqual(['running', 'running', 'cancelled', 'cancelled', 'cancelled']);
      expect(after[0].upstream_batch_id).not.toBeNull();
      expect(after[1].upstream_batch_id).not.toBeNull();
      expect(await t.balance(a.id)).toBe(94);
      expect(await t.ledgerSum(a.id)).toBe(94);

      // Again: nothing more is cancelled or refunded.
      const again = await cancel(a, id).expect(200);
      expect(again.body).toMatchObject({ creditsRefunded: 9, counts: { cancelled: 3 } });
      expect(await ledgerKinds(id)).toEqual([
        { kind: 'batch_charge', amount: '-15' },
        { kind: 'cancel_refund', amount: '9' },
      ]);
      expect(await t.balance(a.id)).toBe(94);
      expect((await batchRow(t, id)).finished_at).toBeNull();
    });

    it('an economy batch none of whose tasks was submitted is cancelled whole, refunded in full, done, and frees its economy slot', async () => {
      const a = await t.account({ plan: 'starter', credits: 100 });
      const ids: string[] = [];
      for (let i = 0; i < 2; i++)
        ids.push((await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['a', 'b'], tier: 'economy' }).expect(201)).body.id);
      await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['a'], tier: 'economy' }).expect(403);

      const res = await cancel(a, ids[0]).expect(200);
      expect(res.body).toMatchObject({
        status: 'cancelled',
        done: true,
        counts: { pending: 0, running: 0, cancelled: 2 },
        creditsRefunded: 6,
      });
      expect(await t.balance(a.id)).toBe(94);
      expect(await t.ledgerSum(a.id)).toBe(94);
      expect((await getJson(t, a, '/v1/me').expect(200)).body.limits).toMatchObject({
        activeEconomyBatches: 1,
        maxConcurrentEconomyBatches: 2,
      });
      await postBatch(t, a, { model: 'gamma-5-pro', prompts: ['a'], tier: 'economy' }).expect(201);
    });
  });
});
