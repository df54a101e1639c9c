import { TestingModule } from '@nestjs/testing';
import { buildConfig } from '@app/config';
import {
  createBatch,
  fileEnvironment,
  FileEnvironment,
  flapping,
  OpenAiFakeUpstream,
  taskRows,
  TestAccount,
  TestApp,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

const FAILURES_TO_OPEN = 3;
const COOLDOWN_MS = 1000;
const CONCURRENCY = 4;

/**
 * Failover along a chain of two routes, each a fake OpenAI upstream on 127.0.0.1, the real
 * generator consuming from Redis: whatever the primary does (down from the start, dying
 * mid-run, flapping, hanging past its timeoutMs, resetting connections) every task succeeds
 * on some route, with that route and its price recorded, and the money exact; a content
 * refusal never fails over; while the primary's circuit is open it gets no more than probes.
 */
describe('failover along a chain of routes', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  const primary = new OpenAiFakeUpstream();
  const fallback = new OpenAiFakeUpstream();
  let models = 0;

  beforeAll(async () => {
    await primary.start();
    await fallback.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('route_failover', {
      upstream: { ...base.upstream, allowPrivate: true },
      providerApiKeys: { OPENAI_API_KEY: 'sk-test-failover' },
      generator: { concurrency: CONCURRENCY, maxAttempts: 3, backoffMs: 20, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 100_000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await primary.stop();
    await fallback.stop();
    await env?.teardown();
  });
  beforeEach(() => {
    primary.outage = null;
    fallback.outage = null;
    primary.latencyMs = 0;
    fallback.latencyMs = 0;
    primary.requests.length = 0;
    fallback.requests.length = 0;
  });

  /** A model on [primary, fallback], each priced apart, so a task's cost tells its route; a fresh circuit each time. */
  async function chainedModel(primaryExtra: Record<string, unknown> = {}): Promise<string> {
    const key = `failover-${++models}`;
    await api
      .admin('post', '/v1/admin/models')
      .send({
        key,
        displayName: key,
        creditCost: { '1K': 2 },
        resolutionsByRatio: { '1:1': ['1K'] },
        routes: [
          { type: 'openai', baseUrl: primary.baseUrl, model: 'gpt-image-1', price: { per: 'image', usd: 0.01 }, ...primaryExtra },
          { type: 'openai', baseUrl: fallback.baseUrl, model: 'gpt-image-1-mini', price: { per: 'image', usd: 0.02 } },
        ],
        failover: { failuresToOpen: FAILURES_TO_OPEN, cooldownMs: COOLDOWN_MS },
      })
      .expect(201);
    return key;
  }

  async function expectAllMade(batchId: string, images: number): Promise<Array<{ route_index: number; upstream_cost_micros: string }>> {
    const tasks = await taskRows(api, batchId);
    expect(tasks).toHaveLength(images);
    expect(tasks.filter((t) => t.status !== 'succeeded')).toEqual([]);
    // Each image priced by the route that made it.
    for (const t of tasks as unknown as Array<{ route_index: number; upstream_cost_micros: string }>) {
      expect(Number(t.upstream_cost_micros)).toBe(t.route_index === 0 ? 10_000 : 20_000);
    }
    expect(await api.balance(a.id)).toBe(await api.ledgerSum(a.id));
    return tasks as unknown as Array<{ route_index: number; upstream_cost_micros: string }>;
  }

  /** The primary's calls no more than: those that opened the circuit, those in flight then, one probe per cooldown. */
  function expectOnlyProbes(ms: number): void {
    const probes = Math.ceil(ms / COOLDOWN_MS) + 1;
    expect(primary.requests.length).toBeLessThanOrEqual(FAILURES_TO_OPEN + CONCURRENCY + probes);
  }

  const batchOf = (model: string, n: number) =>
    createBatch(api, a, { model, prompts: Array.from({ length: n }, (_, i) => `a lighthouse ${i}`), aspectRatio: '1:1', resolution: '1K' });

  it('the primary down from the start (503): every task made by the fallback, the primary given no more than probes', async () => {
    const model = await chainedModel();
    primary.outage = 'down';
    const started = Date.now();
    const batchId = await batchOf(model, 30);
    await waitForBatchDone(api, batchId, 60_000);
    const tasks = await expectAllMade(batchId, 30);
    expect(tasks.every((t) => t.route_index === 1)).toBe(true);
    expect(fallback.requests).toHaveLength(30);
    expectOnlyProbes(Date.now() - started);
    const { body } = await api.admin('get', '/v1/admin/models').expect(200);
    const states = body.models.find((m: { key: string }) => m.key === model).routesHealth;
    expect(states[0].circuit.state).not.toBe('closed');
    expect(states[1].circuit.state).toBe('closed');
  });

  it.each([
    ['resetting connections', 'reset' as const, {}],
    ['hanging past its timeoutMs', 'hang' as const, { timeoutMs: 300 }],
  ])('the primary %s: every task made by the fallback', async (_, outage, extra) => {
    const model = await chainedModel(extra);
    primary.outage = outage;
    const started = Date.now();
    const batchId = await batchOf(model, 12);
    await waitForBatchDone(api, batchId, 60_000);
    const tasks = await expectAllMade(batchId, 12);
    expect(tasks.every((t) => t.route_index === 1)).toBe(true);
    expectOnlyProbes(Date.now() - started);
  });

  it('the primary dying mid-run: the first images by the primary, the rest by the fallback', async () => {
    const model = await chainedModel();
    let served = 0;
    primary.outage = () => (++served > 10 ? 'down' : null);
    const batchId = await batchOf(model, 40);
    await waitForBatchDone(api, batchId, 60_000);
    const tasks = await expectAllMade(batchId, 40);
    expect(tasks.filter((t) => t.route_index === 0)).toHaveLength(10);
    expect(tasks.filter((t) => t.route_index === 1)).toHaveLength(30);
    // Operators see each image's route on the batch, and the usage report counts each by it.
    const { body } = await api.admin('get', `/v1/admin/batches/${batchId}`).expect(200);
    const shown = body.tasks.map((t: { route: { index: number; type: string } }) => t.route);
    expect(shown.filter((r: { index: number }) => r.index === 0)).toHaveLength(10);
    expect(shown.filter((r: { index: number }) => r.index === 1)).toHaveLength(30);
    expect(new Set(shown.map((r: { type: string }) => r.type))).toEqual(new Set(['openai']));
    const today = new Date().toISOString().slice(0, 10);
    const usage = await api.admin('get', `/v1/admin/usage?from=${today}&to=${today}&groupBy=route`).expect(200);
    const byRoute = Object.fromEntries(usage.body.rows.map((r: { route: string }) => [r.route, r]));
    const [made] = await api.db.query(
      `SELECT count(*) FILTER (WHERE route_index = 0)::int AS first, count(*) FILTER (WHERE route_index = 1)::int AS second
         FROM tasks WHERE status = 'succeeded'`,
    );
    expect(byRoute['openai/gpt-image-1']).toMatchObject({ images: made.first, upstreamCostUsd: made.first * 0.01 });
    expect(byRoute['openai/gpt-image-1-mini']).toMatchObject({ images: made.second, upstreamCostUsd: made.second * 0.02 });
  });

  it('the primary flapping (down 5 s, up 5 s): every task succeeds on some route', async () => {
    const model = await chainedModel();
    primary.outage = flapping(5000, 5000);
    // Both answer slowly enough that the run spans a few flaps.
    primary.latencyMs = 400;
    fallback.latencyMs = 400;
    const batchId = await batchOf(model, 60);
    await waitForBatchDone(api, batchId, 90_000);
    await expectAllMade(batchId, 60);
  }, 120_000);

  it('a model with one route keeps no circuit: more failures in a row than failuresToOpen, and its tasks still retry there', async () => {
    const key = `failover-${++models}`;
    await api
      .admin('post', '/v1/admin/models')
      .send({
        key,
        displayName: key,
        creditCost: { '1K': 2 },
        resolutionsByRatio: { '1:1': ['1K'] },
        routes: [{ type: 'openai', baseUrl: primary.baseUrl, model: 'gpt-image-1', price: { per: 'image', usd: 0.01 } }],
        failover: { failuresToOpen: FAILURES_TO_OPEN, cooldownMs: 600_000 },
      })
      .expect(201);
    const down = () => ({ status: 503, body: JSON.stringify({ error: { message: 'down' } }) });
    primary.answerNext(...Array.from({ length: CONCURRENCY }, down));
    const batchId = await batchOf(key, CONCURRENCY);
    await waitForBatchDone(api, batchId, 30_000);
    const tasks = await taskRows(api, batchId);
    expect(tasks.map((t) => [t.status, (t as unknown as { route_index: number }).route_index])).toEqual(tasks.map(() => ['succeeded', 0]));
    // Each task failed once and was retried on its one route: an open circuit would have held them for its cooldown.
    expect(primary.requests).toHaveLength(2 * CONCURRENCY);
    const { body } = await api.admin('get', '/v1/admin/models').expect(200);
    const [only] = body.models.find((m: { key: string }) => m.key === key).routesHealth;
    expect(only.circuit).toEqual({ state: 'closed', failures: 0, openUntil: null });
  });

  it('a content refusal on the primary fails the task without touching the fallback', async () => {
    const model = await chainedModel();
    primary.answerNext(OpenAiFakeUpstream.refusal());
    const batchId = await batchOf(model, 1);
    await waitForBatchDone(api, batchId);
    const [task] = await taskRows(api, batchId);
    expect(task).toMatchObject({ status: 'failed', error_code: 'content_refused', route_index: 0 });
    expect(fallback.requests).toHaveLength(0);
    expect(await api.balance(a.id)).toBe(await api.ledgerSum(a.id));
  });
});
