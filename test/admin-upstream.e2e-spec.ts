import { TestApp, fileEnvironment, FileEnvironment } from '@app/testing';
import { bootApi } from './helpers/apps';

const MODEL = 'beta-2-lite';

/**
 * An operator's base URL gets the same egress check as every upstream call: refused at
 * PATCH time when it points inside the network, unless UPSTREAM_ALLOW_PRIVATE says otherwise.
 */
describe('admin: a model route must point at a public upstream', () => {
  let env: FileEnvironment;
  let strict: TestApp;
  let permissive: TestApp;

  beforeAll(async () => {
    env = await fileEnvironment('admin_upstream');
    strict = await bootApi({ ...env.config, upstream: { ...env.config.upstream, allowPrivate: false } });
    permissive = await bootApi({ ...env.config, upstream: { ...env.config.upstream, allowPrivate: true } });
  });
  afterAll(async () => {
    await strict?.close();
    await permissive?.close();
    await env?.teardown();
  });

  const route = (baseUrl: string) => ({ provider: { type: 'openai', baseUrl, model: 'img' } });
  const providerOf = async (t: TestApp) =>
    ((await t.admin('get', '/v1/admin/models').expect(200)).body.models as { key: string; provider: unknown }[]).find(
      (m) => m.key === MODEL,
    )!.provider;

  it.each([
    'https://127.0.0.1/v1',
    'http://127.0.0.1:8080/v1',
    'https://localhost:8443/v1',
    // Internal names, refused by name: they need not resolve from the api to be refused.
    'https://localhost./v1',
    'https://metadata.google.internal/computeMetadata/v1',
    'https://gpu-box.local/v1',
    'https://169.254.169.254/latest',
    'http://169.254.169.254/',
    'https://10.0.0.8/v1',
    'https://192.168.1.20/v1',
    'https://100.64.0.1/v1',
    'https://[::1]/v1',
    'https://[fe80::1]/v1',
    'https://[fd00::5]/v1',
    'https://[::ffff:127.0.0.1]/v1',
    'https://[::ffff:a9fe:a9fe]/v1',
    'https://0.0.0.0/v1',
  ])('refuses %s without UPSTREAM_ALLOW_PRIVATE, changing nothing', async (baseUrl) => {
    const res = await strict.admin('patch', `/v1/admin/models/${MODEL}`).send(route(baseUrl));
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({
      code: 'invalid_request',
      details: { field: 'provider.baseUrl', reason: 'forbidden_address' },
    });
    expect(res.body.error.message).toContain('UPSTREAM_ALLOW_PRIVATE=true');
    expect(await providerOf(strict)).toEqual({ type: 'builtin' });
  });

  it('refuses plain http to a public address without UPSTREAM_ALLOW_PRIVATE', async () => {
    const res = await strict.admin('patch', `/v1/admin/models/${MODEL}`).send(route('http://93.184.215.14/v1'));
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual({ field: 'provider.baseUrl', reason: 'not_https' });
  });

  it('accepts a public https upstream, and a name that does not resolve from the api (checked again per call)', async () => {
    for (const baseUrl of ['https://93.184.215.14/v1', 'https://upstream.invalid/v1']) {
      const res = await strict.admin('patch', `/v1/admin/models/${MODEL}`).send(route(baseUrl)).expect(200);
      expect(res.body.model.provider).toMatchObject({ type: 'openai', baseUrl });
    }
    await strict
      .admin('patch', `/v1/admin/models/${MODEL}`)
      .send({ provider: { type: 'builtin' } })
      .expect(200);
  });

  it('accepts loopback, link-local and plain http upstreams with UPSTREAM_ALLOW_PRIVATE=true', async () => {
    for (const baseUrl of ['http://127.0.0.1:8080/v1', 'http://localhost:8000/v1', 'https://169.254.169.254/v1', 'http://[::1]:9000/v1']) {
      const res = await permissive.admin('patch', `/v1/admin/models/${MODEL}`).send(route(baseUrl)).expect(200);
      expect(res.body.model.provider).toMatchObject({ type: 'openai', baseUrl });
    }
    await permissive
      .admin('patch', `/v1/admin/models/${MODEL}`)
      .send({ provider: { type: 'builtin' } })
      .expect(200);
  });
});
