import * as http from 'node:http';
import sharp from 'sharp';
import { ProviderRoute } from '@app/database';
import { bearer, createBatch, GeneratorProcess, TestAccount, TestApp, waitFor, waitForBatchDone } from '@app/testing';
import { useGeneratorProcesses } from './helpers/apps';
import { LocalServer } from './helpers/local-server';
import { freePort } from './helpers/private-redis';

const UPSTREAM_KEY_ENV = 'KILN_OPS_UPSTREAM_API_KEY';

/** An OpenAI-compatible upstream: [refuse] answers 400, [429-once] rate-limits the first call, [down] always answers 500. */
class Upstream extends LocalServer {
  private readonly calls = new Map<string, number>();
  protected handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const prompt = String(JSON.parse(Buffer.concat(chunks).toString('utf8')).prompt ?? '');
      const n = (this.calls.get(prompt) ?? 0) + 1;
      this.calls.set(prompt, n);
      const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      // A plain 400 (upstream_rejected); content refusals (content_refused) are generator-openai's.
      if (prompt.includes('[refuse]')) return json(400, { error: { message: 'Rejected by the safety system', code: 'invalid_value' } });
      if (prompt.includes('[down]')) return json(500, { error: { message: 'The upstream is down' } });
      if (prompt.includes('[429-once]') && n === 1)
        return json(429, { error: { message: 'Rate limit reached' } }, { 'retry-after-ms': '100' });
      void sharp({ create: { width: 64, height: 64, channels: 3, background: '#336699' } })
        .png()
        .toBuffer()
        .then((png) => json(200, { data: [{ b64_json: png.toString('base64') }] }));
    });
  }
}

/** `name{labels} value` lines of a Prometheus text exposition, labels matched as a subset. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | null {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1], l[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return null;
}

jest.setTimeout(90_000);

describe('operators: metrics, task logs, route health, support routes', () => {
  const kiln = useGeneratorProcesses('operators', {
    childEnv: {
      NODE_ENV: 'production',
      LOG_LEVEL: 'info',
      UPSTREAM_ALLOW_PRIVATE: 'true',
      [UPSTREAM_KEY_ENV]: 'sk-ops-test',
      OPENAI_API_KEY: '',
      TASK_BACKOFF_MS: '50',
      TASK_MAX_ATTEMPTS: '3',
    },
    overrides: (base) => ({ upstream: { ...base.upstream, allowPrivate: true } }),
  });
  let api: TestApp;
  let gen: GeneratorProcess;
  let metricsPort: number;
  const upstream = new Upstream();
  let a: TestAccount;

  const route = (apiKeyEnv = UPSTREAM_KEY_ENV): ProviderRoute => ({
    type: 'openai',
    baseUrl: `${upstream.base}/v1`,
    model: 'up-1',
    apiKeyEnv,
  });
  const scrapeGenerator = async () => (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const jsonLines = () =>
    gen
      .output()
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Record<string, any>);

  async function healthOf(model: string): Promise<Record<string, any>> {
    const res = await api.admin('get', '/v1/admin/models').expect(200);
    return res.body.models.find((m: { key: string }) => m.key === model).routeHealth;
  }

  beforeAll(async () => {
    await upstream.start();
    api = kiln.api;
    metricsPort = await freePort();
    gen = kiln.start({ GENERATOR_HEALTH_PORT: String(metricsPort) });
    await waitFor(
      'the generator to report its keys',
      async () => {
        const res = await api.admin('patch', '/v1/admin/models/beta-2').send({ provider: route('KILN_OPS_NOT_SET_API_KEY') });
        return res.status === 400 ? true : null;
      },
      30_000,
      200,
    );
    a = await api.account({ plan: 'scale', credits: 1000 });
  });
  afterAll(async () => {
    await upstream.stop();
  });

  it('a batch with a success, a retry and a failure: metrics, one log line per task, upstream warnings', async () => {
    await api.admin('patch', '/v1/admin/models/beta-2').send({ provider: route() }).expect(200);
    const id = await createBatch(api, a, { model: 'beta-2', prompts: ['plain [ok]', 'busy [429-once]', 'nope [refuse]'] });
    await waitForBatchDone(api, id);
    const cost = 4; // beta-2 at 1K

    const g = await scrapeGenerator();
    const labels = { model: 'beta-2', provider: 'openai' };
    // The 429 is one Kiln caused by going too fast: asked again within the same attempt (route
    // pacing), so it starts no second attempt; the retries counter still counts the ask again.
    expect(sample(g, 'kiln_tasks_started_total', labels)).toBe(3);
    expect(sample(g, 'kiln_tasks_succeeded_total', labels)).toBe(2);
    expect(sample(g, 'kiln_tasks_failed_total', { ...labels, error_code: 'upstream_rejected' })).toBe(1);
    expect(sample(g, 'kiln_task_retries_total', { ...labels, error_code: 'upstream_unavailable' })).toBe(1);
    expect(sample(g, 'kiln_upstream_rate_limited_total', labels)).toBe(1);
    expect(sample(g, 'kiln_refunds_total', { model: 'beta-2' })).toBe(1);
    expect(sample(g, 'kiln_credits_refunded_total', { model: 'beta-2' })).toBe(cost);
    expect(sample(g, 'kiln_upstream_duration_seconds_count', { ...labels, outcome: 'ok' })).toBe(2);
    expect(sample(g, 'kiln_upstream_duration_seconds_count', { ...labels, outcome: 'error' })).toBe(2);
    expect(sample(g, 'process_cpu_seconds_total')).not.toBeNull();

    const scrape = await api.http.get('/metrics').set('Authorization', `Bearer ${process.env.ADMIN_TOKEN}`).expect(200);
    expect(scrape.headers['content-type']).toMatch(/^text\/plain/);
    expect(sample(scrape.text, 'kiln_credits_charged_total', { model: 'beta-2' })).toBe(3 * cost);
    expect(sample(scrape.text, 'kiln_http_requests_total', { method: 'POST', route: '/v1/batches', status: '201' })).toBe(1);
    expect(sample(scrape.text, 'kiln_http_request_duration_seconds_count', { method: 'POST', route: '/v1/batches', status: '201' })).toBe(
      1,
    );
    for (const state of ['waiting', 'active', 'delayed']) expect(sample(scrape.text, 'kiln_queue_jobs', { state })).toBe(0);
    expect(sample(scrape.text, 'kiln_tasks_pending')).toBe(0);
    expect(sample(scrape.text, 'kiln_oldest_pending_task_age_seconds')).toBe(0);
    expect(sample(scrape.text, 'kiln_webhook_deliveries_due')).toBe(0);
    expect(sample(scrape.text, 'kiln_webhook_delivery_lag_seconds')).toBe(0);
    expect(sample(scrape.text, 'kiln_rate_limit_fallback_active')).toBe(0);

    // Every line the production generator wrote is JSON (JSON.parse throws otherwise).
    const lines = jsonLines();
    const finished = lines.filter((l) => l.context === 'Tasks' && l.batchId === id && l.level === 30);
    expect(finished).toHaveLength(3);
    for (const l of finished) {
      expect(l).toMatchObject({ model: 'beta-2', provider: 'openai', durationMs: expect.any(Number), taskId: expect.any(String) });
    }
    expect(finished.map((l) => [l.outcome, l.attempts, l.errorCode]).sort()).toEqual([
      ['failed', 1, 'upstream_rejected'],
      ['succeeded', 1, null],
      ['succeeded', 1, null],
    ]);
    const warnings = lines.filter((l) => l.context === 'Tasks' && l.level === 40);
    expect(warnings.map((l) => [l.status, l.errorCode, l.upstreamKind, l.retrying]).sort()).toEqual([
      [400, 'upstream_rejected', 'bad_request', false],
      [429, 'upstream_unavailable', 'rate_limited', true],
    ]);
    for (const w of warnings) expect(w.route).toBe(`openai ${upstream.base}/v1 (up-1)`);
  });

  it('the api refuses /metrics without the admin token', async () => {
    await api.http.get('/metrics').expect(401);
    await api.http.get('/metrics').set('Authorization', bearer(a)).expect(401);
  });

  it('route health: not_configured, failing with the last error and when, then ok', async () => {
    // Written behind the admin API's back, as a route set before a generator lost its key would be.
    await api.db.query(`UPDATE models SET provider = $1 WHERE key = 'beta-2-1'`, [route('KILN_OPS_NOT_SET_API_KEY')]);
    expect(await healthOf('beta-2-1')).toEqual({ state: 'not_configured', missing: ['KILN_OPS_NOT_SET_API_KEY'] });
    const unconfigured = await createBatch(api, a, { model: 'beta-2-1', prompts: ['one', 'two'] });
    await waitForBatchDone(api, unconfigured);
    // One error line for the model, however many of its tasks fail.
    const errors = jsonLines().filter((l) => l.level === 50 && l.model === 'beta-2-1');
    expect(errors).toHaveLength(1);
    expect(errors[0].msg).toContain('KILN_OPS_NOT_SET_API_KEY is not set');

    await api.admin('patch', '/v1/admin/models/beta-pro').send({ provider: route() }).expect(200);
    const before = Date.now();
    await waitForBatchDone(api, await createBatch(api, a, { model: 'beta-pro', prompts: ['broken [down]'] }));
    const failing = await waitFor('the failure to reach Redis', async () => {
      const h = await healthOf('beta-pro');
      return h.state === 'failing' ? h : null;
    });
    expect(failing).toMatchObject({
      state: 'failing',
      errorCode: 'upstream_unavailable',
      status: 500,
      lastError: expect.stringContaining('The upstream is down'),
    });
    expect(Date.parse(failing.lastErrorAt)).toBeGreaterThanOrEqual(before - 1000);

    await waitForBatchDone(api, await createBatch(api, a, { model: 'beta-pro', prompts: ['good'] }));
    const ok = await waitFor('the success to reach Redis', async () => {
      const h = await healthOf('beta-pro');
      return h.state === 'ok' ? h : null;
    });
    expect(Date.parse(ok.lastSuccessAt)).toBeGreaterThan(Date.parse(failing.lastErrorAt) - 1);
    expect(await healthOf('alpha-image-2')).toMatchObject({ state: 'ok' });
  });

  it("route health counts only the route's own failures, and a new route starts with no history", async () => {
    await api.admin('patch', '/v1/admin/models/beta-pro').send({ provider: route() }).expect(200);
    await waitForBatchDone(api, await createBatch(api, a, { model: 'beta-pro', prompts: ['fine'] }));
    const ok = await waitFor('the success to reach Redis', async () => {
      const h = await healthOf('beta-pro');
      return h.state === 'ok' && h.lastSuccessAt ? h : null;
    });
    // One user's request refused (a 400: a refusal or an invalid request) says nothing of the route.
    const refused = await createBatch(api, a, { model: 'beta-pro', prompts: ['bad [refuse]'] });
    await waitForBatchDone(api, refused);
    const batch = await api.http.get(`/v1/batches/${refused}`).set('Authorization', bearer(a)).expect(200);
    expect(batch.body.tasks[0].errorCode).toBe('upstream_rejected');
    await new Promise((r) => setTimeout(r, 500));
    expect(await healthOf('beta-pro')).toEqual(ok);

    // Routed to another upstream model: that route has made nothing yet.
    await api
      .admin('patch', '/v1/admin/models/beta-pro')
      .send({ provider: { ...route(), model: 'up-2' } })
      .expect(200);
    expect(await healthOf('beta-pro')).toEqual({ state: 'ok', lastSuccessAt: null });
  });

  it('a PATCH routing to an upstream key the generators do not have is refused and changes nothing', async () => {
    const before = (await api.db.query(`SELECT provider FROM models WHERE key = 'beta-2-lite'`))[0].provider;
    const res = await api
      .admin('patch', '/v1/admin/models/beta-2-lite')
      .send({ provider: route('KILN_OPS_NOT_SET_API_KEY') })
      .expect(400);
    expect(res.body.error).toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('KILN_OPS_NOT_SET_API_KEY'),
      details: { field: 'provider.apiKeyEnv', missing: ['KILN_OPS_NOT_SET_API_KEY'] },
    });
    expect((await api.db.query(`SELECT provider FROM models WHERE key = 'beta-2-lite'`))[0].provider).toEqual(before);
    // The default key name is checked too: this generator has no OPENAI_API_KEY.
    const plain = await api
      .admin('patch', '/v1/admin/models/beta-2-lite')
      .send({ provider: { type: 'openai', baseUrl: `${upstream.base}/v1`, model: 'up-1' } });
    expect(plain.status).toBe(400);
    expect(plain.body.error.details.missing).toEqual(['OPENAI_API_KEY']);
  });

  it("support: any account's batch by id, keys by id or hint, revoke", async () => {
    const other = await api.account({ plan: 'scale', credits: 100 });
    const id = await createBatch(api, other, { model: 'alpha-image-2', prompts: ['support me'] });
    const found = await api.admin('get', `/v1/admin/batches/${id}`).expect(200);
    expect(found.body).toMatchObject({
      accountId: other.id,
      batch: { id, model: 'alpha-image-2' },
      tasks: [expect.objectContaining({ prompt: 'support me' })],
    });
    await api.admin('get', '/v1/admin/batches/00000000-0000-4000-8000-000000000000').expect(404);
    await api.admin('get', '/v1/admin/batches/not-a-uuid').expect(404);

    const byId = await api.admin('get', `/v1/admin/keys/${other.keyId}`).expect(200);
    expect(byId.body.keys).toEqual([expect.objectContaining({ id: other.keyId, accountId: other.id, revokedAt: null })]);
    const hint = byId.body.keys[0].hint as string;
    const byHint = await api.admin('get', `/v1/admin/keys/${encodeURIComponent(hint)}`).expect(200);
    expect(byHint.body.keys.map((k: { id: string }) => k.id)).toContain(other.keyId);
    expect((await api.admin('get', '/v1/admin/keys/kiln_live_none...none').expect(200)).body.keys).toEqual([]);

    const revoked = await api.admin('post', `/v1/admin/keys/${other.keyId}/revoke`).expect(200);
    expect(revoked.body.key).toMatchObject({ id: other.keyId, revokedAt: expect.any(Number) });
    const refused = await api.http.get('/v1/batches').set('Authorization', bearer(other)).expect(401);
    expect(refused.body.error.code).toBe('key_revoked');
    // Revoking again (DELETE) keeps the first time.
    const again = await api.admin('delete', `/v1/admin/keys/${other.keyId}`).expect(200);
    expect(again.body.key.revokedAt).toBe(revoked.body.key.revokedAt);
    await api.admin('post', '/v1/admin/keys/00000000-0000-4000-8000-000000000000/revoke').expect(404);
  });

  it('the content blocklist is catalog data: read, replaced, applied at once, refused when malformed', async () => {
    const seeded = (await api.admin('get', '/v1/admin/content-policy').expect(200)).body.terms as string[];
    expect(seeded).toEqual(expect.arrayContaining(['csam', 'child porn']));
    try {
      const put = await api.http
        .put('/v1/admin/content-policy')
        .set('Authorization', `Bearer ${process.env.ADMIN_TOKEN}`)
        .send({ terms: ['Forbidden  Thing', 'forbidden thing', 'csam'] })
        .expect(200);
      expect(put.body.terms).toEqual(['csam', 'forbidden thing']);
      const refused = await api.http
        .post('/v1/batches')
        .set('Authorization', bearer(a))
        .send({ model: 'alpha-image-2', prompts: ['a cat', 'a FORBIDDEN thing'] });
      expect(refused.body.error).toMatchObject({ code: 'content_blocked', details: { index: 1 } });
      const bad = await api.http
        .put('/v1/admin/content-policy')
        .set('Authorization', `Bearer ${process.env.ADMIN_TOKEN}`)
        .send({ terms: ['ok', '   '] });
      expect(bad.status).toBe(400);
      expect(bad.body.error.details).toMatchObject({ field: 'terms[1]' });
      expect((await api.admin('get', '/v1/admin/content-policy').expect(200)).body.terms).toEqual(['csam', 'forbidden thing']);
      await api.http.put('/v1/admin/content-policy').send({ terms: [] }).expect(401);
    } finally {
      await api.http
        .put('/v1/admin/content-policy')
        .set('Authorization', `Bearer ${process.env.ADMIN_TOKEN}`)
        .send({ terms: seeded })
        .expect(200);
    }
  });
});
