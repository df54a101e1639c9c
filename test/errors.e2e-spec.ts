import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { bootTestApp, TestApp } from '@app/testing';
import { CatalogService } from '@app/catalog';

/** The interface's error object from every layer (docs/api.md#errors), and the common headers. */
describe('error envelope, request ids, health and OpenAPI', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(() => t.close());

  const isEnvelope = (body: any, code: string) => {
    expect(Object.keys(body)).toEqual(['error']);
    expect(body.error.code).toBe(code);
    expect(typeof body.error.message).toBe('string');
  };

  it('unknown routes -> 404 not_found', async () => {
    const res = await t.http.get('/v1/nope');
    expect(res.status).toBe(404);
    isEnvelope(res.body, 'not_found');
    const root = await t.http.post('/whatever');
    expect(root.status).toBe(404);
    isEnvelope(root.body, 'not_found');
  });

  it('malformed JSON -> 400 invalid_request', async () => {
    const res = await t.admin('post', '/v1/admin/accounts').set('Content-Type', 'application/json').send('{"email": ');
    expect(res.status).toBe(400);
    isEnvelope(res.body, 'invalid_request');
    expect(res.body.error.details).toEqual({ field: 'body', reason: 'malformed_json' });
  });

  it('authentication answers before the body: malformed JSON without a key -> 401, never parsed', async () => {
    const res = await t.http.post('/v1/batches').set('Content-Type', 'application/json').send('{"prompts": ');
    expect(res.status).toBe(401);
    isEnvelope(res.body, 'unauthorized');
    const admin = await t.http
      .post('/v1/admin/accounts')
      .set('Authorization', 'Bearer wrong-admin-token-0123456789')
      .set('Content-Type', 'application/json')
      .send('{"email": ');
    expect(admin.status).toBe(401);
  });

  it("the body parser's refusals carry X-Request-Id (echoed) and the security headers", async () => {
    const res = await t
      .admin('post', '/v1/admin/accounts')
      .set('X-Request-Id', 'client-req-42')
      .set('Content-Type', 'application/json')
      .send('{"email": ');
    expect(res.status).toBe(400);
    expect(res.headers['x-request-id']).toBe('client-req-42');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('a GET carrying a body is parsed like any other: malformed JSON -> 400 invalid_request', async () => {
    const res = await t.admin('get', '/v1/admin/plans').set('Content-Type', 'application/json').send('{"email": ');
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual({ field: 'body', reason: 'malformed_json' });
    await t.admin('get', '/v1/admin/plans').expect(200);
  });

  it('a JSON body over 1 MB -> 400 invalid_request', async () => {
    const big = JSON.stringify({ email: 'a@b.co', plan: 'studio', pad: 'x'.repeat(1024 * 1024) });
    const res = await t.admin('post', '/v1/admin/accounts').set('Content-Type', 'application/json').send(big);
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual({ field: 'body', reason: 'too_large' });
  });

  it('a JSON array or scalar body -> 400 invalid_request', async () => {
    const res = await t.admin('post', '/v1/admin/accounts').set('Content-Type', 'application/json').send('[1,2]');
    expect(res.status).toBe(400);
    isEnvelope(res.body, 'invalid_request');
  });

  it('a wrong content type -> 400 invalid_request', async () => {
    const res = await t.admin('post', '/v1/admin/accounts').set('Content-Type', 'text/plain').send('email=a@b.co');
    expect(res.status).toBe(400);
    isEnvelope(res.body, 'invalid_request');
  });

  it('validation failures name the field and the reason; unknown fields are refused', async () => {
    const res = await t.admin('post', '/v1/admin/accounts').send({ email: 'a@b.co', plan: 'studio', typo: 1 });
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual({ field: 'typo', reason: 'unknown_field' });
  });

  it('an unexpected exception -> 500 internal_error with the request id, cause not leaked', async () => {
    const catalog = t.app.get(CatalogService);
    const spy = jest.spyOn(catalog, 'listEnabled').mockRejectedValueOnce(new Error('secret database detail'));
    const a = await t.account();
    const res = await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).set('X-Request-Id', 'req-boom-1');
    spy.mockRestore();
    expect(res.status).toBe(500);
    isEnvelope(res.body, 'internal_error');
    expect(JSON.stringify(res.body)).not.toContain('secret database detail');
    expect(res.body.error.details).toEqual({ requestId: 'req-boom-1' });
  });

  it('ids and cursors that only look like UUIDs -> 404 / 400, never a 500', async () => {
    const a = await t.account();
    const dashes = '-'.repeat(36);
    const batch = await t.http.get(`/v1/batches/${dashes}`).set('Authorization', `Bearer ${a.key}`);
    expect(batch.status).toBe(404);
    isEnvelope(batch.body, 'not_found');
    const account = await t.admin('get', `/v1/admin/accounts/${dashes}`);
    expect(account.status).toBe(404);
    const cursor = Buffer.from(JSON.stringify([new Date().toISOString(), dashes])).toString('base64url');
    const list = await t.http.get(`/v1/batches?cursor=${cursor}`).set('Authorization', `Bearer ${a.key}`);
    expect(list.status).toBe(400);
    expect(list.body.error.details).toEqual({ field: 'cursor', reason: 'malformed' });
  });

  it('X-Request-Id: echoed when sent, minted otherwise, on successes and errors', async () => {
    const echoed = await t.http.get('/healthz').set('X-Request-Id', 'abc-123');
    expect(echoed.headers['x-request-id']).toBe('abc-123');
    const minted = await t.http.get('/v1/nope');
    expect(minted.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    const hostile = await t.http.get('/healthz').set('X-Request-Id', 'bad id\twith spaces');
    expect(hostile.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('sends no CORS headers, even to a preflight', async () => {
    const a = await t.account();
    const res = await t.http.get('/v1/models').set('Authorization', `Bearer ${a.key}`).set('Origin', 'https://evil.example');
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    const pre = await t.http.options('/v1/models').set('Origin', 'https://evil.example').set('Access-Control-Request-Method', 'GET');
    expect(pre.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('healthz and readyz', async () => {
    expect((await t.http.get('/healthz').expect(200)).body).toEqual({ status: 'ok' });
    const ready = await t.http.get('/readyz').expect(200);
    expect(ready.body.status).toBe('ok');
    expect(ready.body.details).toMatchObject({ database: { status: 'up' }, redis: { status: 'up' }, storage: { status: 'up' } });
  });

  it('serves an OpenAPI 3 document generated from the code', async () => {
    const res = await t.http.get('/v1/openapi.json').expect(200);
    expect(res.body.openapi).toMatch(/^3\./);
    expect(res.body.paths['/v1/models'].get).toBeDefined();
    expect(res.body.paths['/v1/me'].get).toBeDefined();
    expect(res.body.paths['/v1/admin/accounts'].post).toBeDefined();
    const model = res.body.components.schemas.ModelDto;
    expect(Object.keys(model.properties)).toEqual(
      expect.arrayContaining(['key', 'creditCost', 'resolutionsByRatio', 'supportsRefImages', 'maxRefImages']),
    );
    expect(res.body.components.securitySchemes.apiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
  });
});
