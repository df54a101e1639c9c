import { TestingModule } from '@nestjs/testing';
import { KilnConfig } from '@app/config';
import { KilnMetrics } from '@app/metrics';
import { TestApp, createBatch, fileEnvironment, FileEnvironment, getBatch, routeModel, waitForBatchDone } from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(90_000);

/** Sums a numeric field over report rows. */
const sum = (rows: Record<string, unknown>[], field: string) => rows.reduce((s, r) => s + Number(r[field]), 0);
const today = () => new Date().toISOString().slice(0, 10);

describe('GET /v1/admin/usage: upstream cost, revenue and margin for operators', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;
  const restores: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    env = await fileEnvironment('usage', { generator: { concurrency: 4, maxAttempts: 1, backoffMs: 30 } });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
    // gamma-5-flash (3 credits at 1K) on a priced stand-in that always makes its image;
    // delta (4 credits) on one that always fails (refunded, and not billed upstream).
    restores.push(await routeModel(api, 'gamma-5-flash', { type: 'simulated', cost: { '1K': 0.0125, '2K': 0.05 } }));
    restores.push(await routeModel(api, 'delta', { type: 'simulated', failureRate: 1, cost: { '1K': 0.02 } }));
    // epsilon-2-pro (5 credits at 1K, 6 at 2K) on a stand-in priced at 1K only: its 2K images are unpriced.
    restores.push(await routeModel(api, 'epsilon-2-pro', { type: 'simulated', cost: { '1K': 0.01 } }));
  });
  afterAll(async () => {
    for (const restore of restores) await restore();
    await gen?.close();
    await api?.close();
    await env?.teardown();
  });

  it("sums equal the ledger's; cost, revenue and margin per model and account; the metric counts the cost", async () => {
    const a = await api.account({ credits: 1000 });
    const b = await api.account({ credits: 1000 });
    const ids = [
      await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['one', 'two', 'three'] }),
      await createBatch(api, b, { model: 'gamma-5-flash', prompts: ['four'], resolution: '2K' }),
      await createBatch(api, b, { model: 'delta', prompts: ['five', 'six'] }),
      await createBatch(api, a, { model: 'epsilon-2-pro', prompts: ['seven'] }),
      await createBatch(api, a, { model: 'epsilon-2-pro', prompts: ['eight'], resolution: '2K' }),
      // eta-image stays on builtin: local renders cost nothing upstream, and are priced (at 0), not unpriced.
      await createBatch(api, b, { model: 'eta-image', prompts: ['nine'] }),
    ];
    await Promise.all(ids.map((id) => waitForBatchDone(api, id, 60_000)));

    const ask = async (groupBy: string) => {
      const res = await api.admin('get', `/v1/admin/usage?from=${today()}&to=${today()}&groupBy=${groupBy}`).expect(200);
      return res.body.rows as Record<string, any>[];
    };
    const [ledger] = await api.db.query(
      `SELECT COALESCE(-SUM(amount) FILTER (WHERE kind = 'batch_charge'), 0)::int AS charged,
              COALESCE(SUM(amount) FILTER (WHERE kind IN ('task_refund', 'cancel_refund')), 0)::int AS refunded
         FROM ledger_entries WHERE created_at >= $1::date`,
      [today()],
    );
    const [work] = await api.db.query(
      `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS images, count(*) FILTER (WHERE status = 'failed')::int AS failed,
              COALESCE(SUM(upstream_cost_micros), 0)::bigint AS micros,
              count(*) FILTER (WHERE upstream_cost_micros IS NULL)::int AS unpriced
         FROM tasks WHERE finished_at >= $1::date`,
      [today()],
    );
    expect(work.unpriced).toBe(1);
    for (const groupBy of ['day', 'model', 'account', 'route', 'key']) {
      const rows = await ask(groupBy);
      expect({ groupBy, charged: sum(rows, 'creditsCharged'), refunded: sum(rows, 'creditsRefunded') }).toEqual({
        groupBy,
        charged: ledger.charged,
        refunded: ledger.refunded,
      });
      expect(sum(rows, 'images')).toBe(work.images);
      expect(sum(rows, 'failed')).toBe(work.failed);
      expect(sum(rows, 'unpricedImages')).toBe(work.unpriced);
      expect(Math.round(sum(rows, 'upstreamCostUsd') * 1e6)).toBe(Number(work.micros));
      for (const row of rows) {
        // revenue = net credits x CREDIT_VALUE_USD (default 0.01); margin = revenue - cost.
        expect(row.revenueUsd).toBeCloseTo((row.creditsCharged - row.creditsRefunded) * 0.01, 9);
        expect(row.marginUsd).toBeCloseTo(row.revenueUsd - row.upstreamCostUsd, 9);
      }
    }

    const byModel = Object.fromEntries((await ask('model')).map((r) => [r.model, r]));
    // 3 x 1K at 0.0125 + 1 x 2K at 0.05; 4 images, 4 x 3 credits.
    expect(byModel['gamma-5-flash']).toEqual({
      model: 'gamma-5-flash',
      images: 4,
      failed: 0,
      unpricedImages: 0,
      creditsCharged: 12,
      creditsRefunded: 0,
      upstreamCostUsd: 0.0875,
      revenueUsd: 0.12,
      marginUsd: 0.0325,
    });
    // Failed tasks are refunded and cost nothing upstream.
    expect(byModel.delta).toEqual({
      model: 'delta',
      images: 0,
      failed: 2,
      unpricedImages: 0,
      creditsCharged: 8,
      creditsRefunded: 8,
      upstreamCostUsd: 0,
      revenueUsd: 0,
      marginUsd: 0,
    });
    // The 2K image no price covers is counted unpriced, never recorded at $0; the 1K one is priced.
    expect(byModel['epsilon-2-pro']).toMatchObject({ images: 2, unpricedImages: 1, creditsCharged: 11, upstreamCostUsd: 0.01 });
    const [unpriced] = await api.db.query(`SELECT upstream_cost_micros FROM tasks WHERE batch_id = $1`, [ids[4]]);
    expect(unpriced.upstream_cost_micros).toBeNull();
    expect(byModel['eta-image']).toMatchObject({ images: 1, unpricedImages: 0, upstreamCostUsd: 0 });
    const byAccount = Object.fromEntries((await ask('account')).map((r) => [r.accountId, r]));
    expect(byAccount[a.id]).toMatchObject({ images: 5, unpricedImages: 1, creditsCharged: 20, upstreamCostUsd: 0.0475 });
    expect(byAccount[b.id]).toMatchObject({ images: 2, failed: 2, creditsCharged: 12, creditsRefunded: 8, upstreamCostUsd: 0.05 });
    // By the route each batch ran on (its snapshot): the stand-ins, and builtin.
    const byRoute = Object.fromEntries((await ask('route')).map((r) => [r.route, r]));
    expect(Object.keys(byRoute).sort()).toEqual(['builtin', 'simulated']);
    expect(byRoute.simulated).toMatchObject({ images: 6, failed: 2, unpricedImages: 1, upstreamCostUsd: 0.0975 });
    expect(byRoute.builtin).toMatchObject({ images: 1, upstreamCostUsd: 0, creditsCharged: 1 });
    // By the API key that created the batches.
    const byKey = Object.fromEntries((await ask('key')).map((r) => [r.apiKeyId, r]));
    expect(byKey[a.keyId]).toMatchObject({ images: 5, creditsCharged: 20 });
    expect(byKey[b.keyId]).toMatchObject({ images: 2, creditsCharged: 12 });
    expect((await ask('day')).map((r) => r.day)).toEqual([today()]);

    const metric = await gen.get(KilnMetrics).registry.getSingleMetric('kiln_upstream_cost_usd_total')!.get();
    const flash = metric.values.find((v) => v.labels.model === 'gamma-5-flash' && v.labels.provider === 'simulated');
    expect(flash?.value).toBeCloseTo(0.0875, 9);

    // Never shown to account holders: not on their batch, tasks or the catalog.
    const seen = JSON.stringify([
      await getBatch(api, b, ids[1]),
      (await api.http.get('/v1/models').set('Authorization', `Bearer ${b.key}`)).body,
    ]);
    expect(seen).not.toMatch(/"cost"|upstreamCost|0\.05\b/);
  });

  it('answers CSV when asked with Accept: text/csv: a header line, then one line per row', async () => {
    const json = await api.admin('get', `/v1/admin/usage?from=${today()}&to=${today()}&groupBy=model`).expect(200);
    const res = await api
      .admin('get', `/v1/admin/usage?from=${today()}&to=${today()}&groupBy=model`)
      .set('Accept', 'text/csv')
      .buffer(true)
      .parse((r, done) => {
        let text = '';
        r.on('data', (c: Buffer) => (text += c.toString('utf8')));
        r.on('end', () => done(null, text));
      })
      .expect(200);
    expect(res.headers['content-type']).toMatch(/^text\/csv/);
    expect(res.headers['content-disposition']).toContain(`kiln-usage-${today()}-${today()}-by-model.csv`);
    const lines = (res.body as string).split('\r\n').filter(Boolean);
    expect(lines[0]).toBe('model,images,failed,unpricedImages,creditsCharged,creditsRefunded,upstreamCostUsd,revenueUsd,marginUsd');
    expect(lines).toHaveLength(json.body.rows.length + 1);
    const flash = json.body.rows.find((r: { model: string }) => r.model === 'gamma-5-flash');
    expect(lines).toContain(
      [
        'gamma-5-flash',
        flash.images,
        flash.failed,
        flash.unpricedImages,
        flash.creditsCharged,
        flash.creditsRefunded,
        flash.upstreamCostUsd,
        flash.revenueUsd,
        flash.marginUsd,
      ].join(','),
    );
    // A bad groupBy is the interface's error, as JSON, whatever was asked for.
    const bad = await api.admin('get', '/v1/admin/usage?groupBy=week').set('Accept', 'text/csv').expect(400);
    expect(bad.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'groupBy', reason: 'invalid' } });
  });

  it('a window without activity answers no rows', async () => {
    const res = await api.admin('get', '/v1/admin/usage?from=2020-01-01&to=2020-01-31&groupBy=model').expect(200);
    expect(res.body).toEqual({ rows: [] });
  });

  it.each([
    ['from=2026-13-01', 'from', 'not_a_date'],
    ['to=yesterday', 'to', 'not_a_date'],
    ['from=2026-02-30', 'from', 'not_a_date'],
    ['from=2026-03-02&to=2026-03-01', 'from', 'after_to'],
    ['from=2024-01-01&to=2026-01-01', 'to', 'out_of_range'],
    ['groupBy=week', 'groupBy', 'invalid'],
  ])('refuses %s with invalid_request (%s: %s)', async (query, field, reason) => {
    const res = await api.admin('get', `/v1/admin/usage?${query}`).expect(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field, reason } });
  });

  it('is the operator API: an account key gets no report', async () => {
    const a = await api.account();
    const res = await api.http.get('/v1/admin/usage').set('Authorization', `Bearer ${a.key}`);
    expect([401, 403, 404]).toContain(res.status);
    expect(res.body.rows).toBeUndefined();
  });
});
