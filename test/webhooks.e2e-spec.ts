import { DataSource } from 'typeorm';
import { KilnConfig } from '@app/config';
import { ALL_MIGRATIONS } from '@app/database';
import { SecretBox, sweepWebhookDeliveries } from '@app/webhooks';
import { bearer, createBatch, FileEnvironment, fileEnvironment, TestAccount, TestApp } from '@app/testing';
import { bootApi } from './helpers/apps';

jest.setTimeout(60_000);

/** A literal public address: registration checks it without a name lookup, and nothing here connects to it. */
const PUBLIC_URL = 'https://93.184.216.34/kiln-hook';
const SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/;

describe('webhook endpoints (the api; no WEBHOOK_ALLOW_PRIVATE)', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let t: TestApp;

  beforeAll(async () => {
    env = await fileEnvironment('webhooks_api');
    config = env.config;
    expect(config.webhooks.allowPrivate).toBe(false);
    t = await bootApi(config);
  });
  afterAll(async () => {
    await t?.close();
    await env?.teardown();
  });

  const as = (a: TestAccount, method: 'get' | 'post' | 'delete', path: string) =>
    t.http[method](`/v1${path}`).set('Authorization', bearer(a));
  const endpointCount = async (accountId: string) =>
    (await t.db.query(`SELECT count(*)::int AS n FROM webhook_endpoints WHERE account_id = $1`, [accountId]))[0].n as number;

  it('a cancel that finishes the batch (nothing was running) writes its batch.completed event with the cancel, like a last task settling', async () => {
    const a = await t.account();
    await as(a, 'post', '/webhooks')
      .send({ url: PUBLIC_URL, events: ['batch.completed'] })
      .expect(201);
    // No generator here: every task is still pending when the cancel takes them all.
    const batchId = await createBatch(t, a, { model: 'eta-image', prompts: ['a', 'b'] });
    const cancelled = await as(a, 'post', `/batches/${batchId}/cancel`).expect(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', done: true });
    const rows = await t.db.query(`SELECT type, body FROM webhook_deliveries WHERE account_id = $1`, [a.id]);
    expect(rows.map((r: { type: string }) => r.type)).toEqual(['batch.completed']);
    expect(JSON.parse(rows[0].body).data).toMatchObject({ id: batchId, status: 'cancelled', done: true });
  });

  it('create -> 201 with the endpoint and a whsec_ secret shown once; the secret is stored encrypted; list shows no secret', async () => {
    const a = await t.account();
    const res = await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL, description: 'orders' }).expect(201);
    expect(res.body).toEqual({
      endpoint: {
        id: expect.any(String),
        url: PUBLIC_URL,
        events: ['batch.completed'],
        description: 'orders',
        createdAt: expect.any(Number),
        disabledAt: null,
        consecutiveFailures: 0,
        circuitOpenUntil: null,
      },
      secret: expect.stringMatching(SECRET),
    });
    const { secret } = res.body;
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);

    const [row] = await t.db.query(`SELECT secret_enc, previous_secret_enc FROM webhook_endpoints WHERE id = $1`, [res.body.endpoint.id]);
    expect(row.secret_enc).not.toContain(secret.slice(6));
    expect(row.previous_secret_enc).toBeNull();
    const box = new SecretBox(config.webhooks.secretKey);
    expect(box.open(row.secret_enc, res.body.endpoint.id)).toBe(secret);
    // Sealed to its row: the same ciphertext does not open as another endpoint's.
    expect(() => box.open(row.secret_enc, '00000000-0000-4000-8000-000000000000')).toThrow();

    const list = await as(a, 'get', '/webhooks').expect(200);
    expect(list.body).toEqual({ endpoints: [res.body.endpoint] });
    expect(JSON.stringify(list.body)).not.toContain('whsec_');
  });

  it('events: any of the four types; unknown, empty or duplicated lists and bad bodies -> 400 invalid_request, nothing written', async () => {
    const a = await t.account();
    const ok = await as(a, 'post', '/webhooks')
      .send({ url: PUBLIC_URL, events: ['task.succeeded', 'task.failed', 'batch.completed', 'ping'] })
      .expect(201);
    expect(ok.body.endpoint.events).toEqual(['task.succeeded', 'task.failed', 'batch.completed', 'ping']);
    for (const body of [
      { url: PUBLIC_URL, events: ['task.started'] },
      { url: PUBLIC_URL, events: [] },
      { url: PUBLIC_URL, events: ['ping', 'ping'] },
      { url: PUBLIC_URL, events: 'ping' },
      { url: PUBLIC_URL, description: 'x'.repeat(201) },
      {},
      { url: 42 },
      { url: 'not a url' },
      { url: 'ftp://93.184.216.34/x' },
      { url: 'https://user:pass@93.184.216.34/x' },
    ]) {
      const res = await as(a, 'post', '/webhooks').send(body);
      expect({ body, status: res.status, code: res.body.error?.code }).toEqual({ body, status: 400, code: 'invalid_request' });
    }
    expect(await endpointCount(a.id)).toBe(1);
  });

  it('SSRF: http, loopback, private, link-local (metadata), CGNAT, unspecified, IPv6 and IPv4-mapped forms, and a name resolving to 127.0.0.1 are refused', async () => {
    const a = await t.account();
    const http = await as(a, 'post', '/webhooks').send({ url: 'http://93.184.216.34/hook' }).expect(400);
    expect(http.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'url', reason: 'not_https' } });
    for (const url of [
      'https://127.0.0.1/hook',
      'https://127.1.2.3:8443/hook',
      'https://10.0.0.5/hook',
      'https://172.16.3.4/hook',
      'https://192.168.1.1/hook',
      'https://169.254.169.254/latest/meta-data/',
      'https://100.64.0.1/hook',
      'https://0.0.0.0/hook',
      'https://224.0.0.1/hook',
      'https://[::1]/hook',
      'https://[fd00::1]/hook',
      'https://[fe80::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://[::ffff:169.254.169.254]/hook',
      'https://localhost/hook',
      'http://localhost:8080/hook',
    ]) {
      const res = await as(a, 'post', '/webhooks').send({ url });
      expect({ url, status: res.status, error: res.body.error }).toEqual({
        url,
        status: 400,
        error: { code: 'invalid_request', message: expect.any(String), details: { field: 'url', reason: 'forbidden_address' } },
      });
    }
    expect(await endpointCount(a.id)).toBe(0);
    // The refusal names the setting that would allow it.
    const loopback = await as(a, 'post', '/webhooks').send({ url: 'http://127.0.0.1:9/hook' });
    expect(loopback.body.error.message).toContain('WEBHOOK_ALLOW_PRIVATE=true');
  });

  it('at most 10 endpoints per account: the 11th -> 403 endpoint_limit_exceeded, also when racing', async () => {
    const a = await t.account();
    const results = await Promise.all(Array.from({ length: 12 }, (_, i) => as(a, 'post', '/webhooks').send({ url: `${PUBLIC_URL}/${i}` })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(10);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused.map((r) => [r.status, r.body.error.code])).toEqual([
      [403, 'endpoint_limit_exceeded'],
      [403, 'endpoint_limit_exceeded'],
    ]);
    expect(await endpointCount(a.id)).toBe(10);
    // Another account is not affected.
    const b = await t.account();
    await as(b, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
  });

  it('rotate-secret -> 200 with a new secret; the previous one is kept (encrypted) for 24 h', async () => {
    const a = await t.account();
    const created = await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
    const id = created.body.endpoint.id;
    const rotated = await as(a, 'post', `/webhooks/${id}/rotate-secret`).expect(200);
    expect(rotated.body).toEqual({ secret: expect.stringMatching(SECRET) });
    expect(rotated.body.secret).not.toBe(created.body.secret);
    const [row] = await t.db.query(
      `SELECT secret_enc, previous_secret_enc, extract(epoch FROM previous_secret_expires_at - now()) AS left_s FROM webhook_endpoints WHERE id = $1`,
      [id],
    );
    const box = new SecretBox(config.webhooks.secretKey);
    expect(box.open(row.secret_enc, id)).toBe(rotated.body.secret);
    expect(box.open(row.previous_secret_enc, id)).toBe(created.body.secret);
    expect(Number(row.left_s)).toBeGreaterThan(24 * 3600 - 120);
    expect(Number(row.left_s)).toBeLessThanOrEqual(24 * 3600);
  });

  it('test -> 202 with a pending ping; deliveries lists it newest first with cursor paging', async () => {
    const a = await t.account();
    const { body } = await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
    const id = body.endpoint.id;
    const pings = [];
    for (let i = 0; i < 3; i++) pings.push((await as(a, 'post', `/webhooks/${id}/test`).expect(202)).body.delivery);
    expect(pings[0]).toEqual({
      id: expect.stringMatching(/^evt_[0-9a-f]{32}$/),
      type: 'ping',
      attempts: 0,
      status: 'pending',
      lastStatusCode: null,
      lastError: null,
      nextAttemptAt: expect.any(Number),
      deliveredAt: null,
    });
    const page1 = await as(a, 'get', `/webhooks/${id}/deliveries?limit=2`).expect(200);
    expect(page1.body.deliveries.map((d: { id: string }) => d.id)).toEqual([pings[2].id, pings[1].id]);
    expect(page1.body.nextCursor).toEqual(expect.any(String));
    const page2 = await as(a, 'get', `/webhooks/${id}/deliveries?limit=2&cursor=${page1.body.nextCursor}`).expect(200);
    expect(page2.body).toEqual({
      endpoint: expect.objectContaining({ id, consecutiveFailures: 0, circuitOpenUntil: null }),
      deliveries: [pings[0]],
      nextCursor: null,
    });
    const bad = await as(a, 'get', `/webhooks/${id}/deliveries?limit=0`).expect(400);
    expect(bad.body.error.code).toBe('invalid_request');
    const badCursor = await as(a, 'get', `/webhooks/${id}/deliveries?cursor=nope`).expect(400);
    expect(badCursor.body.error.code).toBe('invalid_request');
  });

  const deliveryRows = async (endpointId: string) =>
    (await t.db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1`, [endpointId]))[0].n as number;

  it('delete -> 204, then 404; its log is unreachable at once and removed by the next sweep', async () => {
    const a = await t.account();
    const { body } = await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
    const id = body.endpoint.id;
    await as(a, 'post', `/webhooks/${id}/test`).expect(202);
    const kept = (await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201)).body.endpoint.id;
    await as(a, 'post', `/webhooks/${kept}/test`).expect(202);
    await as(a, 'delete', `/webhooks/${id}`).expect(204);
    await as(a, 'delete', `/webhooks/${id}`).expect(404);
    await as(a, 'get', `/webhooks/${id}/deliveries`).expect(404);
    expect(await sweepWebhookDeliveries(t.db, new Date(Date.now() - 30 * 86_400_000))).toBeGreaterThanOrEqual(1);
    expect(await deliveryRows(id)).toBe(0);
    // A live endpoint's pending ping stays.
    expect(await deliveryRows(kept)).toBe(1);
  });

  it('the delivery log sweep removes deliveries settled before the cutoff, in bounded rounds, and keeps pending and recent ones', async () => {
    const a = await t.account();
    const id = (await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201)).body.endpoint.id;
    const insert = (n: number, status: string, daysAgo: number) =>
      t.db.query(
        `INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, type, body, status, next_attempt_at, created_at)
         SELECT 'evt_sweep_' || $5 || '_' || g, $1, $2, 'ping', '{}', $3, CASE WHEN $3 = 'pending' THEN now() + interval '1 hour' END,
                now() - $4 * interval '1 day'
           FROM generate_series(1, $6) AS g`,
        [id, a.id, status, daysAgo, `${status}${daysAgo}`, n],
      );
    await insert(7, 'delivered', 31);
    await insert(3, 'failed', 31);
    await insert(2, 'pending', 31);
    await insert(4, 'delivered', 29);
    const cutoff = new Date(Date.now() - 30 * 86_400_000);
    // Rounds of 4: the last round is short, and the sweep stops there.
    expect(await sweepWebhookDeliveries(t.db, cutoff, 4)).toBe(10);
    const left = await t.db.query(
      `SELECT status, count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1 GROUP BY status ORDER BY status`,
      [id],
    );
    expect(left).toEqual([
      { status: 'delivered', n: 4 },
      { status: 'pending', n: 2 },
    ]);
    expect(await sweepWebhookDeliveries(t.db, cutoff, 4)).toBe(0);
  });

  it('/metrics: deliveries due and not yet sent, and how long the oldest has waited (no generator runs here)', async () => {
    const gauge = async (name: string) => {
      const text = (await t.http.get('/metrics').set('Authorization', `Bearer ${process.env.ADMIN_TOKEN}`).expect(200)).text;
      const line = text.split('\n').find((l) => l.startsWith(`${name} `));
      return line === undefined ? null : Number(line.split(' ')[1]);
    };
    const a = await t.account();
    const id = (await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201)).body.endpoint.id;
    const before = (await gauge('kiln_webhook_deliveries_due'))!;
    await as(a, 'post', `/webhooks/${id}/test`).expect(202);
    expect(await gauge('kiln_webhook_deliveries_due')).toBe(before + 1);
    // The ping has waited 90 s for a sender.
    await t.db.query(`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '90 seconds' WHERE endpoint_id = $1`, [id]);
    expect(await gauge('kiln_webhook_delivery_lag_seconds')).toBeGreaterThanOrEqual(90);
    // Leased by a sender (next attempt in the future): no longer waiting.
    await t.db.query(`UPDATE webhook_deliveries SET next_attempt_at = now() + interval '25 seconds' WHERE endpoint_id = $1`, [id]);
    expect(await gauge('kiln_webhook_deliveries_due')).toBe(before);
  });

  it('scope: a key without webhooks:manage -> 403 insufficient_scope on every route; new keys get it by default', async () => {
    const owner = await t.account();
    const { body } = await as(owner, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
    const id = body.endpoint.id;
    const [key] = await t.db.query(`SELECT scopes FROM api_keys WHERE id = $1`, [owner.keyId]);
    expect(key.scopes).toContain('webhooks:manage');

    const limited = await t.account({ scopes: ['models:read', 'account:read', 'batches:read', 'batches:write', 'uploads:write'] });
    for (const [method, path] of [
      ['post', '/webhooks'],
      ['get', '/webhooks'],
      ['delete', `/webhooks/${id}`],
      ['post', `/webhooks/${id}/rotate-secret`],
      ['post', `/webhooks/${id}/test`],
      ['get', `/webhooks/${id}/deliveries`],
    ] as const) {
      const res = await as(limited, method, path).send(method === 'post' ? { url: PUBLIC_URL } : undefined);
      expect({ path, status: res.status, error: res.body.error }).toMatchObject({
        path,
        status: 403,
        error: { code: 'insufficient_scope', details: { required: 'webhooks:manage' } },
      });
    }
    const unauthenticated = await t.http.get('/v1/webhooks');
    expect(unauthenticated.status).toBe(401);
  });

  it('account isolation: another account (key or session) sees none of it and gets 404 on every route by id; nothing changes', async () => {
    const owner = await t.account();
    const { body } = await as(owner, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
    const id = body.endpoint.id;
    await as(owner, 'post', `/webhooks/${id}/test`).expect(202);
    const before = await t.db.query(`SELECT * FROM webhook_endpoints WHERE id = $1`, [id]);

    const other = await t.account();
    expect((await as(other, 'get', '/webhooks').expect(200)).body).toEqual({ endpoints: [] });
    const signup = await t.http
      .post('/v1/dashboard/signup')
      .send({ email: `w-${Date.now()}@example.test`, password: 'correct horse battery' })
      .expect(201);
    const session = { Authorization: `Bearer ${signup.body.token}` };
    expect((await t.http.get('/v1/dashboard/webhooks').set(session).expect(200)).body).toEqual({ endpoints: [] });

    for (const [method, path] of [
      ['delete', `/webhooks/${id}`],
      ['post', `/webhooks/${id}/rotate-secret`],
      ['post', `/webhooks/${id}/test`],
      ['get', `/webhooks/${id}/deliveries`],
      ['delete', '/webhooks/not-a-uuid'],
    ] as const) {
      const viaKey = await as(other, method, path);
      const viaSession = await t.http[method](`/v1/dashboard${path}`).set(session);
      expect([path, viaKey.status, viaKey.body.error?.code, viaSession.status, viaSession.body.error?.code]).toEqual([
        path,
        404,
        'not_found',
        404,
        'not_found',
      ]);
    }
    expect(await t.db.query(`SELECT * FROM webhook_endpoints WHERE id = $1`, [id])).toEqual(before);
    const [{ n }] = await t.db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1`, [id]);
    expect(n).toBe(1);
  });

  it('the dashboard routes: create, list, rotate, test, deliveries and delete for a signed-in holder', async () => {
    const signup = await t.http
      .post('/v1/dashboard/signup')
      .send({ email: `d-${Date.now()}@example.test`, password: 'correct horse battery' })
      .expect(201);
    const dash = (method: 'get' | 'post' | 'delete', path: string) =>
      t.http[method](`/v1/dashboard${path}`).set({ Authorization: `Bearer ${signup.body.token}` });
    const created = await dash('post', '/webhooks')
      .send({ url: PUBLIC_URL, events: ['task.failed'] })
      .expect(201);
    expect(created.body.secret).toMatch(SECRET);
    const id = created.body.endpoint.id;
    expect((await dash('get', '/webhooks').expect(200)).body.endpoints.map((e: { id: string }) => e.id)).toEqual([id]);
    expect((await dash('post', `/webhooks/${id}/rotate-secret`).expect(200)).body.secret).toMatch(SECRET);
    const ping = await dash('post', `/webhooks/${id}/test`).expect(202);
    expect((await dash('get', `/webhooks/${id}/deliveries`).expect(200)).body.deliveries[0].id).toBe(ping.body.delivery.id);
    const refused = await dash('post', '/webhooks').send({ url: 'https://169.254.169.254/' }).expect(400);
    expect(refused.body.error.details).toEqual({ field: 'url', reason: 'forbidden_address' });
    await dash('delete', `/webhooks/${id}`).expect(204);
    expect((await dash('get', '/webhooks').expect(200)).body).toEqual({ endpoints: [] });
  });

  it('without WEBHOOK_SECRET_KEY: create and rotate -> 503 service_unavailable, nothing written; list still works', async () => {
    const a = await t.account();
    const { body } = await as(a, 'post', '/webhooks').send({ url: PUBLIC_URL }).expect(201);
    const unkeyed = await bootApi({ ...config, webhooks: { ...config.webhooks, secretKey: null } });
    try {
      const res = await unkeyed.http.post('/v1/webhooks').set('Authorization', bearer(a)).send({ url: PUBLIC_URL });
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'service_unavailable', message: expect.stringContaining('WEBHOOK_SECRET_KEY') });
      const rotate = await unkeyed.http.post(`/v1/webhooks/${body.endpoint.id}/rotate-secret`).set('Authorization', bearer(a));
      expect(rotate.status).toBe(503);
      await unkeyed.http.get('/v1/webhooks').set('Authorization', bearer(a)).expect(200);
    } finally {
      await unkeyed.close();
    }
    expect(await endpointCount(a.id)).toBe(1);
  });

  it('the migration gives webhooks:manage to existing keys holding every earlier scope, and not to keys made with fewer', async () => {
    const a = await t.account();
    const ds = new DataSource({ type: 'postgres', url: config.databaseUrl, migrations: ALL_MIGRATIONS, migrationsTableName: 'migrations' });
    await ds.initialize();
    try {
      // Back to the schema before webhooks (later migrations undone first), with keys as they were then.
      while ((await ds.query(`SELECT 1 FROM migrations WHERE name = 'Webhooks1763888400140'`)).length > 0) await ds.undoLastMigration();
      const full = await ds.query(
        `INSERT INTO api_keys (account_id, name, key_hash, hint, scopes) VALUES ($1, 'full', 'h-full', 'x',
          ARRAY['models:read','account:read','batches:read','batches:write','uploads:write']) RETURNING id`,
        [a.id],
      );
      const fewer = await ds.query(
        `INSERT INTO api_keys (account_id, name, key_hash, hint, scopes) VALUES ($1, 'fewer', 'h-fewer', 'x', ARRAY['batches:read','batches:write']) RETURNING id`,
        [a.id],
      );
      await ds.runMigrations();
      const scopes = async (id: string) => (await ds.query(`SELECT scopes FROM api_keys WHERE id = $1`, [id]))[0].scopes;
      expect(await scopes(full[0].id)).toEqual([
        'models:read',
        'account:read',
        'batches:read',
        'batches:write',
        'uploads:write',
        'webhooks:manage',
      ]);
      expect(await scopes(fewer[0].id)).toEqual(['batches:read', 'batches:write']);
    } finally {
      await ds.destroy();
    }
  });
});
