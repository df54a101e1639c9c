import { fileEnvironment, FileEnvironment, postBatch, TestAccount, TestApp } from '@app/testing';
import { bootApi } from './helpers/apps';

/**
 * A model's chain of routes in the admin API: `routes` beside `provider` (its one-route
 * shorthand), `failover` settings with their defaults, refusals that name the route and the
 * setting, the sizes rule of a chain, and the batch's snapshot of both.
 */
describe('admin: a chain of routes and its failover settings', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let a: TestAccount;

  beforeAll(async () => {
    env = await fileEnvironment('route_chains');
    api = await bootApi(env.config);
    a = await api.account({ plan: 'scale', credits: 1000 });
  });
  afterAll(async () => {
    await api?.close();
    await env?.teardown();
  });

  const adminModel = async (key: string) =>
    ((await api.admin('get', '/v1/admin/models').expect(200)).body.models as Record<string, any>[]).find((m) => m.key === key)!;

  it('a model with one route reads back routes [provider] and the default failover settings', async () => {
    const m = await adminModel('delta');
    expect(m.routes).toEqual([m.provider]);
    expect(m.failover).toEqual({
      on: ['server_error', 'rate_limited', 'timeout', 'connection'],
      cooldownMs: 60000,
      failuresToOpen: 5,
      sizes: 'all',
    });
    expect(m.routesHealth).toEqual([
      { index: 0, type: m.provider.type, health: expect.any(Object), circuit: { state: 'closed', failures: 0, openUntil: null } },
    ]);
  });

  it('routes: presets expanded, provider reads back as routes[0], each route with its health', async () => {
    const { body } = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ routes: [{ type: 'simulated' }, { type: 'builtin' }], failover: { cooldownMs: 5000 } })
      .expect(200);
    expect(body.model.routes).toEqual([{ type: 'simulated' }, { type: 'builtin' }]);
    expect(body.model.provider).toEqual({ type: 'simulated' });
    expect(body.model.failover).toMatchObject({ cooldownMs: 5000, failuresToOpen: 5 });
    const m = await adminModel('delta');
    expect(m.routesHealth.map((r: { index: number; type: string }) => [r.index, r.type])).toEqual([
      [0, 'simulated'],
      [1, 'builtin'],
    ]);
    // A later failover edit keeps the other settings.
    const again = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ failover: { failuresToOpen: 2 } })
      .expect(200);
    expect(again.body.model.failover).toMatchObject({ cooldownMs: 5000, failuresToOpen: 2 });

    const chained = await api
      .admin('patch', '/v1/admin/models/alpha-image-2')
      .send({ routes: [{ preset: 'openai/gpt-image-1' }, { type: 'builtin' }] })
      .expect(200);
    expect(chained.body.model.routes[0]).toMatchObject({ type: 'openai', preset: 'openai/gpt-image-1', model: 'gpt-image-1' });
    expect(chained.body.model.provider).toEqual(chained.body.model.routes[0]);
    // Every route makes the pairs offered: the preset's narrowing holds for the chain.
    expect(chained.body.model.resolutionsByRatio).toEqual({ '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] });
  });

  it("docs/providers.md's two-route chain for alpha-image-2 answers as the doc shows", async () => {
    const { body } = await api
      .admin('patch', '/v1/admin/models/alpha-image-2')
      .send({
        routes: [{ preset: 'openai/gpt-image-1' }, { preset: 'openai/gpt-image-1', baseUrl: 'https://gateway.example.com/v1' }],
        failover: { cooldownMs: 30000 },
      })
      .expect(200);
    expect(JSON.stringify({ routes: body.model.routes.map((r: { type: string }) => r.type), failover: body.model.failover })).toBe(
      '{"routes":["openai","openai"],"failover":{"on":["server_error","rate_limited","timeout","connection"],"cooldownMs":30000,"failuresToOpen":5,"sizes":"all"}}',
    );
    expect(body.model.routes[1].baseUrl).toBe('https://gateway.example.com/v1');
    expect(body.model.resolutionsByRatio).toEqual({ '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] });
  });

  it('provider alone is the one-route shorthand: the chain becomes that route', async () => {
    const { body } = await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ provider: { type: 'builtin' } })
      .expect(200);
    expect(body.model.routes).toEqual([{ type: 'builtin' }]);
  });

  it.each([
    [{ routes: [{ type: 'builtin' }, { type: 'openai', model: 'gpt-image-1', baseUrl: 'nope' }] }, 'routes[1].baseUrl', 'not_a_url'],
    [{ routes: [{ type: 'builtin' }, { preset: 'openai/dall-e-9' }] }, 'routes[1].preset', 'unknown_preset'],
    [{ routes: [{ type: 'builtin' }, { type: 'teleport' }] }, 'routes[1].type', 'unknown_provider'],
    [{ routes: [] }, 'routes', 'empty'],
    [{ routes: Array.from({ length: 6 }, () => ({ type: 'builtin' })) }, 'routes', 'too_many'],
    [{ routes: [{ type: 'builtin' }], provider: { type: 'builtin' } }, 'routes', 'conflicts_with_provider'],
    [{ failover: { on: ['server_error', 'content_refused'] } }, 'failover.on[1]', 'unknown_kind'],
    [{ failover: { cooldownMs: 10 } }, 'failover.cooldownMs', 'out_of_range'],
    [{ failover: { failuresToOpen: 0 } }, 'failover.failuresToOpen', 'out_of_range'],
    [{ failover: { sizes: 'some' } }, 'failover.sizes', 'invalid'],
    [{ failover: { retries: 3 } }, 'failover.retries', 'unknown_key'],
  ])('%j is refused naming %s, and changes nothing', async (patch, field, reason) => {
    const before = await adminModel('beta-2');
    const res = await api.admin('patch', '/v1/admin/models/beta-2').send(patch).expect(400);
    expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field, reason } });
    const after = await adminModel('beta-2');
    expect({ ...after, routesHealth: null, routeHealth: null }).toEqual({ ...before, routesHealth: null, routeHealth: null });
  });

  it("sizes: a pair is offered when every route makes it; with sizes 'primary', when the first does", async () => {
    // beta-2 offers 29 pairs on builtin; gpt-image-1 without a preset makes 3 of them: refused as a fallback.
    const refused = await api
      .admin('patch', '/v1/admin/models/beta-2')
      .send({ routes: [{ type: 'builtin' }, { type: 'openai', model: 'gpt-image-1' }] })
      .expect(400);
    expect(refused.body.error.details).toMatchObject({ field: 'resolutionsByRatio', reason: 'route_cannot_make', route: 1 });
    const primary = await api
      .admin('patch', '/v1/admin/models/beta-2')
      .send({ routes: [{ type: 'builtin' }, { type: 'openai', model: 'gpt-image-1' }], failover: { sizes: 'primary' } })
      .expect(200);
    expect(Object.values(primary.body.model.resolutionsByRatio).flat()).toHaveLength(29);
    // Back to 'all': the fallback's narrowing applies (by preset), or is refused (without one).
    await api
      .admin('patch', '/v1/admin/models/beta-2')
      .send({ failover: { sizes: 'all' } })
      .expect(400);
    await api
      .admin('patch', '/v1/admin/models/beta-2')
      .send({ provider: { type: 'builtin' }, failover: { sizes: 'all' } })
      .expect(200);
  });

  it('a batch snapshots the chain and the failover settings at its creation', async () => {
    await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ routes: [{ type: 'simulated', latencyMs: { min: 1, max: 2 } }, { type: 'builtin' }], failover: { failuresToOpen: 3 } })
      .expect(200);
    const m = await adminModel('delta');
    const ratio = Object.keys(m.resolutionsByRatio)[0];
    const res = await postBatch(api, a, {
      model: 'delta',
      prompts: ['a'],
      aspectRatio: ratio,
      resolution: m.resolutionsByRatio[ratio][0],
    }).expect(201);
    const [row] = await api.db.query(`SELECT provider, routes, failover FROM batches WHERE id = $1`, [res.body.id]);
    expect(row.routes).toEqual(m.routes);
    expect(row.provider).toEqual(m.routes[0]);
    expect(row.failover).toMatchObject({ failuresToOpen: 3, cooldownMs: 5000 });
    // Edits apply to later batches only.
    await api
      .admin('patch', '/v1/admin/models/delta')
      .send({ provider: { type: 'builtin' } })
      .expect(200);
    const [same] = await api.db.query(`SELECT routes FROM batches WHERE id = $1`, [res.body.id]);
    expect(same.routes).toEqual(m.routes);
  });
});
