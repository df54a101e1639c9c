import { bearer, TestAccount, TestApp, fileEnvironment, FileEnvironment } from '@app/testing';
import { bootApi } from './helpers/apps';

/**
 * v1.2 section 1 for operators: route types and presets (GET /v1/admin/providers), routes
 * given by preset and stored expanded, honest sizes, models created (fromPreset) and edited.
 */
describe('admin: providers, presets, honest sizes and models of the operator', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let a: TestAccount;

  beforeAll(async () => {
    env = await fileEnvironment('admin_providers');
    api = await bootApi(env.config);
    a = await api.account({ plan: 'scale', credits: 0 });
  });
  afterAll(async () => {
    await api?.close();
    await env?.teardown();
  });

  const adminModel = async (key: string) =>
    ((await api.admin('get', '/v1/admin/models').expect(200)).body.models as Record<string, any>[]).find((m) => m.key === key)!;
  const publicModel = async (key: string) =>
    ((await api.http.get('/v1/models').set('Authorization', bearer(a)).expect(200)).body.models as Record<string, any>[]).find(
      (m) => m.key === key,
    );

  it('GET /v1/admin/providers: every type with its settings, and presets with price and retirement', async () => {
    const { body } = await api.admin('get', '/v1/admin/providers').expect(200);
    expect(body.types.map((t: { type: string }) => t.type)).toEqual(expect.arrayContaining(['builtin', 'openai', 'gemini', 'simulated']));
    const gemini = body.types.find((t: { type: string }) => t.type === 'gemini');
    expect(gemini).toMatchObject({ mode: 'sync', keyVariable: 'GEMINI_API_KEY' });
    expect(gemini.settings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'baseUrl', required: false, default: 'https://generativelanguage.googleapis.com/v1beta' }),
        expect.objectContaining({ name: 'model', required: true }),
        expect.objectContaining({ name: 'apiKeyEnv', required: false, default: 'GEMINI_API_KEY' }),
      ]),
    );
    const ids = body.presets.map((p: { id: string }) => p.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'openai/gpt-image-1',
        'openai/gpt-image-1-mini',
        'gemini/gemini-3.1-flash-image',
        'gemini/gemini-3-pro-image',
      ]),
    );
    expect(body.presets.find((p: { id: string }) => p.id === 'openai/gpt-image-1-mini')).toMatchObject({
      retiresAt: '2026-12-01',
      cost: {
        usdPerImage: { '1K': expect.any(Number) },
        readOn: expect.stringMatching(/^\d{4}-\d{2}-\d{2}$/),
        rule: expect.objectContaining({ per: 'size' }),
        source: expect.stringMatching(/^https:\/\//),
      },
      price: expect.stringMatching(/^USD per image by size x quality: .* \(openai, read \d{4}-\d{2}-\d{2}, https:\/\//),
    });
    // fal's flux/dev: per megapixel, rounded up, as fal bills it.
    expect(body.presets.find((p: { id: string }) => p.id === 'fal/fal-ai/flux/dev').price).toMatch(
      /^USD 0\.025 per megapixel, rounded up \(fal, read /,
    );
    await api.http.get('/v1/admin/providers').expect(401);
  });

  it('a route by preset is stored expanded, narrows the pairs to what it makes, and GET /v1/models offers only those', async () => {
    const before = await adminModel('alpha-image-2');
    expect(Object.keys(before.resolutionsByRatio)).toHaveLength(10);
    const { body } = await api
      .admin('patch', '/v1/admin/models/alpha-image-2')
      .send({ provider: { preset: 'openai/gpt-image-1', timeoutMs: 90_000 } })
      .expect(200);
    expect(body.model.provider).toEqual({
      type: 'openai',
      preset: 'openai/gpt-image-1',
      baseUrl: 'https://api.openai.com/v1',
      model: 'gpt-image-1',
      apiKeyEnv: 'OPENAI_API_KEY',
      timeoutMs: 90_000,
      // The preset's price rule (size x quality, usage tokens, the Batch API's share), which prices what each task
      // made for the operator's usage report (an operator's own cost table wins where it lists the image).
      price: expect.objectContaining({
        per: 'size',
        usd: expect.objectContaining({ '1536x1024': { low: 0.016, medium: 0.063, high: 0.25 } }),
      }),
    });
    expect(body.model.resolutionsByRatio).toEqual({ '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] });
    expect((await publicModel('alpha-image-2'))!.resolutionsByRatio).toEqual({ '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] });
  });

  it('a PATCH that offers a pair the route cannot make is refused, and changes nothing', async () => {
    const before = await adminModel('alpha-image-2');
    const res = await api
      .admin('patch', '/v1/admin/models/alpha-image-2')
      .send({ resolutionsByRatio: { '1:1': ['1K', '2K'], '16:9': ['1K'] } })
      .expect(400);
    expect(res.body.error).toMatchObject({
      code: 'invalid_request',
      details: { field: 'resolutionsByRatio', reason: 'route_cannot_make', pairs: ['1:1 at 2K', '16:9 at 1K'] },
    });
    // Routing a 29-pair model to gpt-image-1 without a preset (nothing narrows) is refused too.
    const wide = await api
      .admin('patch', '/v1/admin/models/beta-2')
      .send({ provider: { type: 'openai', model: 'gpt-image-1' } })
      .expect(400);
    expect(wide.body.error.details).toMatchObject({ field: 'resolutionsByRatio', reason: 'route_cannot_make' });
    expect(wide.body.error.details.pairs).toHaveLength(26);
    expect(await adminModel('alpha-image-2')).toEqual({ ...before, routeHealth: expect.anything() });
    expect((await adminModel('beta-2')).provider).toEqual({ type: 'builtin' });
  });

  it('a sizeMap that maps every offered size to an honest one is accepted', async () => {
    await api
      .admin('patch', '/v1/admin/models/beta-2-lite')
      .send({
        resolutionsByRatio: { '1:1': ['1K'], '3:2': ['1K'] },
        provider: { type: 'openai', model: 'gpt-image-1', sizeMap: { '1248x832': '1536x1024' } },
      })
      .expect(200);
  });

  it('an unknown preset, or an override of another type, is refused', async () => {
    const unknown = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ provider: { preset: 'openai/dall-e-9' } })
      .expect(400);
    expect(unknown.body.error.details).toEqual({ field: 'provider.preset', reason: 'unknown_preset' });
    const other = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ provider: { preset: 'openai/gpt-image-1', type: 'gemini' } })
      .expect(400);
    expect(other.body.error.details).toEqual({ field: 'provider.type', reason: 'not_the_preset_type' });
    const sizeMap = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ provider: { type: 'openai', model: 'x', sizeMap: { '1024x1024': 5 } } })
      .expect(400);
    expect(sizeMap.body.error.details).toEqual({ field: 'provider.sizeMap', reason: 'invalid' });
  });

  it('routeWarnings flags a preset whose upstream model retires within 30 days (or has)', async () => {
    await api
      .admin('patch', '/v1/admin/models/zeta-image-3')
      .send({ provider: { preset: 'openai/gpt-image-1-mini' } })
      .expect(200);
    const [warning] = (await adminModel('zeta-image-3')).routeWarnings;
    expect(warning).toMatchObject({
      preset: 'openai/gpt-image-1-mini',
      retiresAt: '2026-12-01',
      code: expect.stringMatching(/^preset_retir(ed|ing)$/),
    });
    expect((await adminModel('eta-image')).routeWarnings).toEqual([]);
  });

  it('routeWarnings no_margin: delta (4 credits = USD 0.04) routed to bfl/flux-pro-1.1 (USD 0.04 an image) makes nothing', async () => {
    const { body } = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ provider: { preset: 'bfl/flux-pro-1.1' } })
      .expect(200);
    const noMargin = body.routeWarnings.find((w: { code: string }) => w.code === 'no_margin');
    expect(noMargin).toMatchObject({ code: 'no_margin', marginUsd: 0, message: expect.any(String) });
    expect(noMargin.pairs).toContainEqual({ aspectRatio: '1:1', resolution: '1K', marginUsd: 0 });
    expect(noMargin.pairs).toHaveLength(Object.values(body.model.resolutionsByRatio as Record<string, string[]>).flat().length);
    // The catalog's admin view says the same.
    expect((await adminModel('delta')).routeWarnings).toEqual(body.routeWarnings);
    // Charging more clears it.
    const raised = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ creditCost: { '1K': 5 } })
      .expect(200);
    expect(raised.body.routeWarnings).toEqual([]);
    await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ creditCost: { '1K': 4 }, provider: { type: 'builtin' } })
      .expect(200);
  });

  it('routeWarnings unpriced: a route that cannot price a pair it offers says which; a price rule clears it', async () => {
    const { body } = await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({ provider: { type: 'simulated', cost: { '1K': 0.01 } } })
      .expect(200);
    expect(body.routeWarnings).toHaveLength(1);
    const [unpriced] = body.routeWarnings;
    expect(unpriced).toMatchObject({ code: 'unpriced', message: expect.any(String) });
    const ratios = Object.keys(body.model.resolutionsByRatio as Record<string, string[]>);
    expect(unpriced.pairs).toEqual(expect.arrayContaining(ratios.map((aspectRatio) => ({ aspectRatio, resolution: '2K' }))));
    expect(unpriced.pairs.every((p: { resolution: string }) => p.resolution === '2K')).toBe(true);
    expect((await adminModel('epsilon-2-pro')).routeWarnings).toEqual(body.routeWarnings);
    const priced = await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({ provider: { type: 'simulated', cost: { '1K': 0.01 }, price: { per: 'megapixel', usd: 0.005, rounding: 'up' } } })
      .expect(200);
    expect(priced.body.routeWarnings).toEqual([]);
    const bad = await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({ provider: { type: 'simulated', price: { per: 'megapixel', usd: 0.005 } } })
      .expect(400);
    expect(bad.body.error.details).toEqual({ field: 'provider.price', reason: 'invalid_rounding' });
    await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({ provider: { type: 'builtin' } })
      .expect(200);
  });

  it('POST /v1/admin/models fromPreset: pairs at the priced resolutions, caps, supports and route from the preset', async () => {
    const { body } = await api
      .admin('post', '/v1/admin/models')
      .send({
        key: 'studio-flash',
        displayName: 'Studio Flash',
        blurb: 'Gemini for the studio.',
        creditCost: { '1K': 4, '2K': 8 },
        fromPreset: 'gemini/gemini-3.1-flash-image',
      })
      .expect(201);
    expect(body.model).toMatchObject({
      key: 'studio-flash',
      displayName: 'Studio Flash',
      enabled: true,
      maxRefImages: 14,
      supportsRefImages: true,
      supportsQuality: false,
      provider: { type: 'gemini', preset: 'gemini/gemini-3.1-flash-image', model: 'gemini-3.1-flash-image', apiKeyEnv: 'GEMINI_API_KEY' },
    });
    expect(Object.keys(body.model.resolutionsByRatio)).toHaveLength(10);
    expect(body.model.resolutionsByRatio['16:9']).toEqual(['1K', '2K']);
    const listed = await publicModel('studio-flash');
    expect(listed).toMatchObject({ displayName: 'Studio Flash', blurb: 'Gemini for the studio.' });

    const taken = await api
      .admin('post', '/v1/admin/models')
      .send({ key: 'studio-flash', displayName: 'Again', creditCost: { '1K': 1 } })
      .expect(400);
    expect(taken.body.error.details).toEqual({ field: 'key', reason: 'taken' });
    const noPrice = await api.admin('post', '/v1/admin/models').send({ key: 'no-price', displayName: 'No price' }).expect(400);
    expect(noPrice.body.error.details).toMatchObject({ field: 'creditCost' });
    const noPairs = await api
      .admin('post', '/v1/admin/models')
      .send({ key: 'no-pairs', displayName: 'No pairs', creditCost: { '1K': 1 } })
      .expect(400);
    expect(noPairs.body.error.details).toEqual({ field: 'resolutionsByRatio', reason: 'empty' });
    const badKey = await api
      .admin('post', '/v1/admin/models')
      .send({ key: 'Bad Key', displayName: 'x', creditCost: { '1K': 1 } })
      .expect(400);
    expect(badKey.body.error.details).toMatchObject({ field: 'key' });
    expect(await publicModel('no-price')).toBeUndefined();
  });

  it('PATCH edits displayName, blurb and the supports flags', async () => {
    await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({
        displayName: 'Epsilon Two Pro',
        blurb: 'Renamed.',
        supportsQuality: true,
        supportsBackground: true,
        supportsRefImages: false,
      })
      .expect(200);
    expect(await publicModel('epsilon-2-pro')).toMatchObject({
      displayName: 'Epsilon Two Pro',
      blurb: 'Renamed.',
      supportsQuality: true,
      supportsBackground: true,
      supportsRefImages: false,
    });
    await api.admin('patch', '/v1/admin/models/epsilon-2-pro').send({ displayName: '' }).expect(400);
  });

  it("a model's own pairs are kept apart from its route's offer: routed to a narrower preset and back, its 2K returns", async () => {
    const own = (await adminModel('epsilon-2-pro')).resolutionsByRatio as Record<string, string[]>;
    expect(own['1:1']).toEqual(['1K', '2K']);
    expect(own['4:3']).toEqual(['1K', '2K']);

    // FLUX schnell on Replicate makes 1K only, and 4:3 at 1152x896 (beyond the 3 % rule): not offered.
    const narrowed = await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({ provider: { preset: 'replicate/black-forest-labs/flux-schnell' } })
      .expect(200);
    const offer = { '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'], '9:16': ['1K'], '16:9': ['1K'], '21:9': ['1K'] };
    expect(narrowed.body.model).toMatchObject({ resolutionsByRatio: offer, ownResolutionsByRatio: own });
    expect((await publicModel('epsilon-2-pro'))!.resolutionsByRatio).toEqual(offer);

    // Another edit on the narrower route keeps the model's own pairs.
    await api.admin('patch', '/v1/admin/models/epsilon-2-pro').send({ blurb: 'On Replicate.' }).expect(200);
    expect((await adminModel('epsilon-2-pro')).ownResolutionsByRatio).toEqual(own);

    const back = await api
      .admin('patch', '/v1/admin/models/epsilon-2-pro')
      .send({ provider: { type: 'builtin' } })
      .expect(200);
    expect(back.body.model).toMatchObject({ resolutionsByRatio: own, ownResolutionsByRatio: own });
    expect((await publicModel('epsilon-2-pro'))!.resolutionsByRatio).toEqual(own);
    expect((await publicModel('epsilon-2-pro'))!.resolutionsByRatio['1:1']).toEqual(['1K', '2K']);
  });

  it("setting resolutionsByRatio sets the model's own pairs, and a price taken away must leave them priced", async () => {
    const pairs = { '1:1': ['1K', '2K'], '16:9': ['1K'] };
    const { body } = await api.admin('patch', '/v1/admin/models/zeta-image-3-pro').send({ resolutionsByRatio: pairs }).expect(200);
    expect(body.model).toMatchObject({ resolutionsByRatio: pairs, ownResolutionsByRatio: pairs });
    await api
      .admin('patch', '/v1/admin/models/zeta-image-3-pro')
      .send({ provider: { preset: 'replicate/black-forest-labs/flux-1.1-pro' } })
      .expect(200);
    expect((await adminModel('zeta-image-3-pro')).resolutionsByRatio).toEqual({ '1:1': ['1K'], '16:9': ['1K'] });
    // The offer has no 2K, the model's own pairs do: taking the 2K price away alone is refused, naming them.
    const refused = await api
      .admin('patch', '/v1/admin/models/zeta-image-3-pro')
      .send({ creditCost: { '1K': 6 } })
      .expect(400);
    expect(refused.body.error.details).toEqual({ field: 'ownResolutionsByRatio.1:1', reason: 'unpriced_resolution_2K' });
    await api
      .admin('patch', '/v1/admin/models/zeta-image-3-pro')
      .send({ creditCost: { '1K': 6 }, resolutionsByRatio: { '1:1': ['1K'], '16:9': ['1K'] } })
      .expect(200);
  });
});
