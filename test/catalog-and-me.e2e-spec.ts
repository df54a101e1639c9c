import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { bootTestApp, TestApp } from '@app/testing';

/** docs/api.md#model-catalog price table: model -> [1K, 2K, 4K, max refs]. */
const PRICES: Record<string, [number | null, number | null, number | null, number | null]> = {
  'alpha-image-2': [5, 10, 20, 4],
  'alpha-image-2-5': [5, 10, 16, 8],
  'beta-pro': [5, 6, 10, 4],
  'beta-2': [4, 6, 10, 4],
  'beta-2-lite': [3, null, null, 4],
  'beta-2-1': [4, 6, 10, 4],
  'gamma-4-5': [null, 6, 6, 4],
  'gamma-5-lite': [null, 5, 5, 4],
  'gamma-5-pro': [6, 12, null, 4],
  'gamma-5-flash': [3, 3, null, 10],
  delta: [4, null, null, 1],
  'epsilon-2-pro': [5, 6, null, 8],
  'zeta-image-3-pro': [6, 10, null, 3],
  'zeta-image-3': [4, 4, null, 3],
  'zeta-image-2-1': [4, 6, null, 10],
  'eta-image': [1, null, null, null],
};
const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];

describe('GET /v1/models and GET /v1/me', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(() => t.close());

  it('lists the sixteen seeded models with the published prices, sizes and caps', async () => {
    const a = await t.account();
    const res = await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
    expect(res.body.models.map((m: any) => m.key)).toEqual(Object.keys(PRICES));
    for (const m of res.body.models) {
      const [k1, k2, k4, refs] = PRICES[m.key];
      const cost: Record<string, number> = {};
      if (k1 !== null) cost['1K'] = k1;
      if (k2 !== null) cost['2K'] = k2;
      if (k4 !== null) cost['4K'] = k4;
      expect(m.creditCost).toEqual(cost);
      expect(m.resolutions).toEqual(Object.keys(cost));
      expect(m.maxRefImages).toBe(refs);
      expect(m.supportsRefImages).toBe(true);
      expect(typeof m.displayName).toBe('string');
      expect(typeof m.blurb).toBe('string');
      expect(typeof m.supportsQuality).toBe('boolean');
      expect(typeof m.supportsBackground).toBe('boolean');
      expect(m.maxPromptLength).toBe(4000);
      expect(m.aspectRatios).toEqual(RATIOS);
      for (const ratio of RATIOS) {
        const expected = Object.keys(cost).filter((r) => !(ratio === '21:9' && r === '4K'));
        expect(m.resolutionsByRatio[ratio]).toEqual(expected);
      }
      expect(Object.keys(m).sort()).toEqual(
        [
          'key',
          'displayName',
          'blurb',
          'creditCost',
          'aspectRatios',
          'resolutions',
          'resolutionsByRatio',
          'supportsRefImages',
          'maxRefImages',
          'supportsQuality',
          'supportsBackground',
          'maxPromptLength',
          'economyCreditCost',
          'economyWindowHours',
        ].sort(),
      );
      // No seeded model has an economy tier (docs/admin.md#economy-tier).
      expect(m).toMatchObject({ economyCreditCost: null, economyWindowHours: null });
    }
  });

  it('carries the defaults and limits of docs/api.md#model-catalog', async () => {
    const a = await t.account();
    const res = await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
    expect(res.body.defaults).toEqual({ aspectRatio: '1:1', resolution: '1K', countPerCombo: 1, refMode: 'none', quality: 'auto' });
    expect(res.body.limits).toEqual({
      countPerCombo: { min: 1, max: 20 },
      maxPrompts: 1000,
      // The reference ceiling of every model, the one a model without a declared cap (eta-image) gets.
      maxRefImages: 16,
      upload: { maxBytes: 10485760, maxFiles: 20, types: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'] },
    });
  });

  it('hides a model an operator disables, and shows an operator price change', async () => {
    const a = await t.account();
    await t.admin('patch', '/v1/admin/models/delta').send({ enabled: false }).expect(200);
    await t
      .admin('patch', '/v1/admin/models/eta-image')
      .send({ creditCost: { '1K': 2 } })
      .expect(200);
    try {
      const res = await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).expect(200);
      expect(res.body.models.map((m: any) => m.key)).not.toContain('delta');
      expect(res.body.models.find((m: any) => m.key === 'eta-image').creditCost).toEqual({ '1K': 2 });
    } finally {
      await t.admin('patch', '/v1/admin/models/delta').send({ enabled: true }).expect(200);
      await t
        .admin('patch', '/v1/admin/models/eta-image')
        .send({ creditCost: { '1K': 1 } })
        .expect(200);
    }
  });

  it('GET /v1/me reports the account, balance, plan limits and key usage', async () => {
    const a = await t.account({ plan: 'studio', credits: 321, creditCapPerDay: 50, scopes: ['account:read', 'models:read'] });
    const res = await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200);
    const next = new Date();
    const midnight = Date.UTC(next.getUTCFullYear(), next.getUTCMonth(), next.getUTCDate() + 1);
    expect(res.body).toEqual({
      user: { id: a.id, email: a.email, plan: 'studio', status: 'active', createdAt: expect.any(Number) },
      credits: { balance: 321, lowCreditsThreshold: null },
      limits: {
        maxImagesPerBatch: 50,
        maxConcurrentBatches: 10,
        activeBatches: 0,
        maxConcurrentEconomyBatches: 10,
        activeEconomyBatches: 0,
      },
      key: {
        id: a.keyId,
        scopes: ['account:read', 'models:read'],
        creditCapPerDay: 50,
        creditsUsedToday: 0,
        capResetsAt: midnight,
        budget: { credits: 50, period: 'day', spent: 0, resetsAt: midnight },
        models: [],
      },
    });
  });

  it.each([
    ['starter', 10, 1, 2],
    ['scale', 100, 20, 50],
  ])('GET /v1/me reports the %s plan limits', async (plan, maxImages, maxConcurrent, maxEconomy) => {
    const a = await t.account({ plan });
    const res = await t.http.get('/v1/me').set('Authorization', `Bearer ${a.key}`).expect(200);
    expect(res.body.limits).toEqual({
      maxImagesPerBatch: maxImages,
      maxConcurrentBatches: maxConcurrent,
      activeBatches: 0,
      maxConcurrentEconomyBatches: maxEconomy,
      activeEconomyBatches: 0,
    });
    expect(res.body.key.creditCapPerDay).toBeNull();
  });
});
