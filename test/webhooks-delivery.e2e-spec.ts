import { TestingModule } from '@nestjs/testing';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { buildConfig, KilnConfig } from '@app/config';
import { SecretBox, WebhookSender } from '@app/webhooks';
import {
  bearer,
  createBatch,
  FileEnvironment,
  fileEnvironment,
  getBatch,
  routeModel,
  solidPng,
  TestAccount,
  TestApp,
  upload,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { ReceivedWebhook, WebhookReceiver } from './helpers/webhook-receiver';

jest.setTimeout(90_000);

/** Short retry delays and timeout so the schedule runs within a test; the shape is the production one. */
function webhookConfig(overrides: Partial<KilnConfig['webhooks']>): Partial<KilnConfig> {
  const base = buildConfig(process.env).webhooks;
  return { webhooks: { ...base, allowPrivate: true, retryDelaysMs: [300, 300, 300], timeoutMs: 1500, pollIntervalMs: 50, ...overrides } };
}

/** Verification by hand with node:crypto, as docs/webhooks.md shows it. */
function verifiesByHand(secret: string, hook: ReceivedWebhook): boolean {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signed = `${String(hook.headers['webhook-id'])}.${String(hook.headers['webhook-timestamp'])}.${hook.body}`;
  const expected = createHmac('sha256', key).update(signed).digest();
  return String(hook.headers['webhook-signature'])
    .split(' ')
    .some((s) => {
      const given = Buffer.from(s.split(',')[1] ?? '', 'base64');
      return s.startsWith('v1,') && given.length === expected.length && timingSafeEqual(given, expected);
    });
}

function verifiesWithLibrary(secret: string, hook: ReceivedWebhook): boolean {
  try {
    new Webhook(secret).verify(hook.body, hook.headers as Record<string, string>);
    return true;
  } catch {
    return false;
  }
}

/**
 * A task as webhook events carry it: the API's object without `startedAt` and `finishedAt`,
 * which only the api's reads and the progress stream carry (docs/api.md).
 */
function asInEvents<T extends Record<string, unknown>>(tasks: T[]): Omit<T, 'startedAt' | 'finishedAt'>[] {
  return tasks.map(({ startedAt: _started, finishedAt: _finished, ...rest }) => rest);
}

describe('webhook delivery by the generator (WEBHOOK_ALLOW_PRIVATE, receiver on 127.0.0.1)', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    env = await fileEnvironment('webhooks_delivery', {
      ...webhookConfig({}),
      generator: { ...buildConfig(process.env).generator, concurrency: 8 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    receiver = await new WebhookReceiver().listen();
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await receiver?.close();
    await env?.teardown();
  });
  beforeEach(() => {
    receiver.reply = () => ({ status: 204 });
  });

  const as = (a: TestAccount, method: 'get' | 'post' | 'delete', path: string) =>
    api.http[method](`/v1${path}`).set('Authorization', bearer(a));
  async function register(a: TestAccount, path: string, events?: string[]): Promise<{ id: string; secret: string }> {
    const res = await as(a, 'post', '/webhooks')
      .send({ url: receiver.url(path), ...(events ? { events } : {}) })
      .expect(201);
    return { id: res.body.endpoint.id, secret: res.body.secret };
  }
  const at = (path: string) => receiver.received.filter((r) => r.path === path);
  const deliveries = async (a: TestAccount, endpointId: string) =>
    (await as(a, 'get', `/webhooks/${endpointId}/deliveries?limit=100`).expect(200)).body.deliveries;

  it('a batch: task.succeeded per task and one batch.completed, each the API object, signed so standardwebhooks and node:crypto verify it', async () => {
    const a = await api.account();
    const all = await register(a, '/all', ['task.succeeded', 'task.failed', 'batch.completed']);
    const done = await register(a, '/done'); // default: batch.completed only
    const stranger = await api.account();
    await register(stranger, '/stranger', ['task.succeeded', 'batch.completed']);

    const batchId = await createBatch(api, a, { model: 'eta-image', prompts: ['red fox', 'blue whale', 'green frog'] });
    await waitForBatchDone(api, batchId);
    await waitFor('4 deliveries to /all and 1 to /done', () => at('/all').length >= 4 && at('/done').length >= 1, 30_000);
    const { batch, tasks } = await getBatch(api, a, batchId);

    const bodies = at('/all').map((h) => JSON.parse(h.body));
    const succeeded = bodies.filter((b) => b.type === 'task.succeeded');
    expect(succeeded.map((b) => b.data).sort((x, y) => x.prompt.localeCompare(y.prompt))).toEqual(
      asInEvents([...tasks].sort((x, y) => x.prompt.localeCompare(y.prompt))),
    );
    const completed = bodies.filter((b) => b.type === 'batch.completed');
    expect(completed).toEqual([
      { id: expect.stringMatching(/^evt_[0-9a-f]{32}$/), type: 'batch.completed', createdAt: expect.any(Number), data: batch },
    ]);
    expect(batch).toMatchObject({ status: 'succeeded', done: true });
    expect(at('/done').map((h) => JSON.parse(h.body).type)).toEqual(['batch.completed']);
    expect(JSON.parse(at('/done')[0].body).data).toEqual(batch);
    // Same event, same id for every endpoint that gets it.
    expect(JSON.parse(at('/done')[0].body).id).toBe(completed[0].id);
    expect(at('/stranger')).toEqual([]);

    for (const hook of at('/all')) {
      const body = JSON.parse(hook.body);
      expect(hook.headers).toMatchObject({ 'content-type': 'application/json', 'webhook-id': body.id });
      expect(Math.abs(Number(hook.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(120);
      expect(hook.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]{43}=$/);
      expect(verifiesWithLibrary(all.secret, hook)).toBe(true);
      expect(verifiesByHand(all.secret, hook)).toBe(true);
      expect(verifiesWithLibrary(done.secret, hook)).toBe(false);
    }
    const log = await deliveries(a, all.id);
    expect(log).toHaveLength(4);
    expect(
      log.every(
        (d: any) =>
          d.status === 'delivered' && d.attempts === 1 && d.lastStatusCode === 204 && d.deliveredAt > 0 && d.nextAttemptAt === null,
      ),
    ).toBe(true);
    expect(log.map((d: any) => d.id).sort()).toEqual(bodies.map((b) => b.id).sort());
  });

  it('task events place each task in its batch (index, promptIndex, refImage, copy) as the API does, batch after batch', async () => {
    const a = await api.account();
    await register(a, '/placed', ['task.succeeded']);
    const refs = [
      await upload(api, a, await solidPng(16, 16, { r: 255, g: 0, b: 0 }), 'red.png'),
      await upload(api, a, await solidPng(16, 16, { r: 0, g: 0, b: 255 }), 'blue.png'),
    ];
    // Two shapes from one account: the outbox keeps each batch's shape, and must not mix them up.
    const each = await createBatch(api, a, { model: 'eta-image', prompts: ['A', 'B'], refMode: 'each', refImages: refs, countPerCombo: 2 });
    const plain = await createBatch(api, a, { model: 'eta-image', prompts: ['C', 'D', 'E'], countPerCombo: 3 });
    await waitForBatchDone(api, each);
    await waitForBatchDone(api, plain);
    await waitFor('17 deliveries to /placed', () => at('/placed').length >= 17, 30_000);
    const byTask = (tasks: any[]) => [...tasks].sort((x, y) => x.index - y.index);
    const sent = at('/placed').map((h) => JSON.parse(h.body).data);
    for (const id of [each, plain]) {
      const { tasks } = await getBatch(api, a, id);
      expect(byTask(sent.filter((t) => t.batchId === id))).toEqual(asInEvents(byTask(tasks)));
    }
    expect(byTask(sent.filter((t) => t.batchId === each)).map((t) => [t.index, t.promptIndex, t.refImage, t.copy])).toEqual([
      [1, 0, refs[0], 1],
      [2, 0, refs[0], 2],
      [3, 0, refs[1], 1],
      [4, 0, refs[1], 2],
      [5, 1, refs[0], 1],
      [6, 1, refs[0], 2],
      [7, 1, refs[1], 1],
      [8, 1, refs[1], 2],
    ]);
  });

  it('failed tasks: task.failed with the Task object (error set), batch.completed with status failed', async () => {
    const a = await api.account();
    await register(a, '/failed', ['task.failed', 'batch.completed']);
    const restore = await routeModel(api, 'beta-pro', { type: 'simulated', latencyMs: 10, failureRate: 1 });
    let batchId: string;
    try {
      batchId = await createBatch(api, a, { model: 'beta-pro', prompts: ['a', 'b'] });
    } finally {
      await restore();
    }
    await waitForBatchDone(api, batchId);
    await waitFor('3 deliveries', () => at('/failed').length >= 3, 30_000);
    const { batch, tasks } = await getBatch(api, a, batchId);
    const bodies = at('/failed').map((h) => JSON.parse(h.body));
    expect(
      bodies
        .filter((b) => b.type === 'task.failed')
        .map((b) => b.data)
        .sort((x, y) => x.prompt.localeCompare(y.prompt)),
    ).toEqual(asInEvents(tasks));
    expect(tasks.every((t) => t.status === 'failed' && t.error)).toBe(true);
    expect(bodies.filter((b) => b.type === 'batch.completed').map((b) => b.data)).toEqual([batch]);
    expect(batch.status).toBe('failed');
  });

  it('retries after 500s with the same webhook-id, then delivered', async () => {
    const a = await api.account();
    const ep = await register(a, '/flaky');
    receiver.reply = (req) => (at('/flaky').indexOf(req) < 2 ? { status: 500 } : { status: 204 });
    const ping = await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    await waitFor('3 attempts', () => at('/flaky').length >= 3, 20_000);
    const ids = at('/flaky').map((h) => h.headers['webhook-id']);
    expect(ids).toEqual([ping.body.delivery.id, ping.body.delivery.id, ping.body.delivery.id]);
    expect(new Set(at('/flaky').map((h) => h.body)).size).toBe(1);
    expect(at('/flaky').every((h) => verifiesWithLibrary(ep.secret, h))).toBe(true);
    const [d] = await waitFor('delivered', async () => {
      const log = await deliveries(a, ep.id);
      return log[0].status === 'delivered' ? log : null;
    });
    expect(d).toMatchObject({ id: ping.body.delivery.id, type: 'ping', attempts: 3, lastStatusCode: 204, lastError: null });
  });

  it('a timeout is retried with the same webhook-id', async () => {
    const a = await api.account();
    const ep = await register(a, '/slow');
    receiver.reply = (req) => (at('/slow').indexOf(req) === 0 ? 'hang' : { status: 204 });
    const ping = await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    await waitFor('2 attempts', () => at('/slow').length >= 2, 20_000);
    expect(at('/slow').map((h) => h.headers['webhook-id'])).toEqual([ping.body.delivery.id, ping.body.delivery.id]);
    const [d] = await waitFor('delivered', async () => {
      const log = await deliveries(a, ep.id);
      return log[0].status === 'delivered' ? log : null;
    });
    expect(d).toMatchObject({ attempts: 2, status: 'delivered' });
  });

  it('after the last retry the delivery is failed, with the last status and no next attempt', async () => {
    const a = await api.account();
    const ep = await register(a, '/down');
    receiver.reply = () => ({ status: 503 });
    await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    const [d] = await waitFor('failed', async () => {
      const log = await deliveries(a, ep.id);
      return log[0].status === 'failed' ? log : null;
    });
    // One attempt, then one per retry delay (three here).
    expect(d).toMatchObject({
      status: 'failed',
      attempts: 4,
      lastStatusCode: 503,
      lastError: 'HTTP 503',
      nextAttemptAt: null,
      deliveredAt: null,
    });
    expect(at('/down')).toHaveLength(4);
  });

  it('deliveries left by a deleted endpoint are dropped by the sender, never sent, more than a round of them at once', async () => {
    const a = await api.account();
    const ep = await register(a, '/deleted', ['task.succeeded']);
    await as(a, 'delete', `/webhooks/${ep.id}`).expect(204);
    // As if 120 events had been written just before the delete.
    await api.db.query(
      `INSERT INTO webhook_deliveries (event_id, endpoint_id, account_id, type, body, next_attempt_at)
       SELECT 'evt_orphan_' || g, $1, $2, 'task.succeeded', '{}', now() FROM generate_series(1, 120) AS g`,
      [ep.id, a.id],
    );
    const left = async () =>
      (await api.db.query(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE endpoint_id = $1`, [ep.id]))[0].n as number;
    await waitFor('the orphaned deliveries dropped', async () => (await left()) === 0, 30_000);
    expect(at('/deleted')).toEqual([]);
  });

  it('410 Gone disables the endpoint: no more attempts, no more events', async () => {
    const a = await api.account();
    const ep = await register(a, '/gone', ['task.succeeded', 'batch.completed']);
    receiver.reply = () => ({ status: 410 });
    await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    const endpoint = await waitFor('disabled', async () => {
      const [e] = (await as(a, 'get', '/webhooks').expect(200)).body.endpoints;
      return e.disabledAt ? e : null;
    });
    expect(endpoint.disabledAt).toEqual(expect.any(Number));
    const [d] = await deliveries(a, ep.id);
    expect(d).toMatchObject({ status: 'failed', attempts: 1, lastStatusCode: 410 });

    const batchId = await createBatch(api, a, { model: 'eta-image', prompts: ['after'] });
    await waitForBatchDone(api, batchId);
    await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    await waitFor('the second ping to be settled', async () => (await deliveries(a, ep.id))[0].status !== 'pending');
    expect((await deliveries(a, ep.id))[0]).toMatchObject({ type: 'ping', status: 'failed', lastError: 'The endpoint is disabled' });
    expect((await deliveries(a, ep.id)).filter((x: any) => x.type !== 'ping')).toEqual([]);
    expect(at('/gone')).toHaveLength(1);
  });

  it('rotation: for 24 h each delivery is signed with the new and the previous secret', async () => {
    const a = await api.account();
    const ep = await register(a, '/rotated');
    const { body } = await as(a, 'post', `/webhooks/${ep.id}/rotate-secret`).expect(200);
    await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    const [hook] = await waitFor('the ping', () => (at('/rotated').length > 0 ? at('/rotated') : null));
    expect(String(hook.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secret of [body.secret, ep.secret]) {
      expect(verifiesWithLibrary(secret, hook)).toBe(true);
      expect(verifiesByHand(secret, hook)).toBe(true);
    }
    // Once the 24 h are over, only the new secret signs.
    await api.db.query(`UPDATE webhook_endpoints SET previous_secret_expires_at = now() - interval '1 second' WHERE id = $1`, [ep.id]);
    await as(a, 'post', `/webhooks/${ep.id}/test`).expect(202);
    const later = await waitFor('the second ping', () => (at('/rotated').length > 1 ? at('/rotated')[1] : null));
    expect(String(later.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifiesWithLibrary(body.secret, later)).toBe(true);
    expect(verifiesWithLibrary(ep.secret, later)).toBe(false);
  });
});

describe('webhook delivery egress checks (no WEBHOOK_ALLOW_PRIVATE at delivery)', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let receiver: WebhookReceiver;
  let strict: WebhookSender;
  let lenient: WebhookSender;

  beforeAll(async () => {
    // The api registers with WEBHOOK_ALLOW_PRIVATE (as if it had been on then); senders are driven by hand.
    env = await fileEnvironment('webhooks_egress', webhookConfig({}));
    api = await bootApi(env.config);
    receiver = await new WebhookReceiver().listen();
    const box = new SecretBox(env.config.webhooks.secretKey);
    strict = new WebhookSender(api.db, { ...env.config, webhooks: { ...env.config.webhooks, allowPrivate: false } }, box);
    lenient = new WebhookSender(api.db, env.config, box);
  });
  afterAll(async () => {
    await api?.close();
    await receiver?.close();
    await env?.teardown();
  });

  const as = (a: TestAccount, method: 'get' | 'post', path: string) => api.http[method](`/v1${path}`).set('Authorization', bearer(a));

  it.each([
    ['loopback', (r: WebhookReceiver) => r.url('/direct')],
    ['a name resolving to 127.0.0.1', (r: WebhookReceiver) => r.url('/named').replace('127.0.0.1', 'localhost')],
    ['link-local (cloud metadata)', () => 'http://169.254.169.254/latest/meta-data/'],
    ['private', () => 'https://10.1.2.3/hook'],
  ])('%s: refused at delivery without connecting, retried later (the address may change), never sent', async (_, url) => {
    const a = await api.account();
    const created = await as(a, 'post', '/webhooks')
      .send({ url: url(receiver) })
      .expect(201);
    const before = receiver.received.length;
    await as(a, 'post', `/webhooks/${created.body.endpoint.id}/test`).expect(202);
    expect(await strict.deliverDue()).toBeGreaterThanOrEqual(1);
    const [d] = (await as(a, 'get', `/webhooks/${created.body.endpoint.id}/deliveries`).expect(200)).body.deliveries;
    expect(d).toMatchObject({
      status: 'pending',
      attempts: 1,
      lastStatusCode: null,
      lastError: expect.stringMatching(/^forbidden_address: /),
    });
    expect(receiver.received.length).toBe(before);
  });

  it('a redirect (to 127.0.0.1) is not followed: the attempt fails and is retried', async () => {
    const a = await api.account();
    receiver.reply = (req) =>
      req.path === '/redirect' ? { status: 302, headers: { location: receiver.url('/target') } } : { status: 204 };
    const created = await as(a, 'post', '/webhooks')
      .send({ url: receiver.url('/redirect') })
      .expect(201);
    await as(a, 'post', `/webhooks/${created.body.endpoint.id}/test`).expect(202);
    expect(await lenient.deliverDue()).toBeGreaterThanOrEqual(1);
    const [d] = (await as(a, 'get', `/webhooks/${created.body.endpoint.id}/deliveries`).expect(200)).body.deliveries;
    expect(d).toMatchObject({ status: 'pending', attempts: 1, lastError: expect.stringMatching(/^redirect: /) });
    expect(receiver.received.map((r) => r.path)).toContain('/redirect');
    expect(receiver.received.map((r) => r.path)).not.toContain('/target');
  });
});
