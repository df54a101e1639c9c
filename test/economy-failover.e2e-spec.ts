import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildConfig, KilnConfig } from '@app/config';
import {
  OPENAI_BATCH_FAKE_MARKERS,
  OpenAiBatchFakeUpstream,
  createBatch,
  fileEnvironment,
  FileEnvironment,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { expectMoneyExact } from './helpers/economy';

jest.setTimeout(120_000);

const GRANTED = 100_000;
const OPENAI_KEY = 'sk-economy-failover-0123456789';

/**
 * Economy tasks on a chain of routes (spec: economy tasks stay on batch-capable routes of the
 * chain; they fail over only to another batch-capable route): they go to the first route of
 * the chain that runs batches, and what an upstream batch that failed never ran moves to the
 * next route that runs batches, each task submitted once per route, priced by the route that
 * made it, the money exact. Without a further batch route they fail and are refunded, as on one
 * route. The real generator's collector, the fake OpenAI Batch API on 127.0.0.1.
 */
describe('economy tier on a chain of routes', () => {
  const first = new OpenAiBatchFakeUpstream({ completeAfterMs: null });
  const second = new OpenAiBatchFakeUpstream({ completeAfterMs: null });
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  let models = 0;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-economy-failover-'));
  const batch = { enabled: true, collectMs: 0, maxRequests: 1000, pollIntervalMs: 100 };

  beforeAll(async () => {
    await first.start();
    await second.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('economy_failover', {
      providerApiKeys: { OPENAI_API_KEY: OPENAI_KEY },
      upstream: { ...base.upstream, allowPrivate: true },
      storage: { ...base.storage, dataDir },
      generator: { concurrency: 4, maxAttempts: 3, backoffMs: 50, reconcileIntervalMs: 600_000, economyTickMs: 100, upstreamLeaseMs: 3000 },
    });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
  });
  // A fresh account each test: the money of each batch is checked against what was granted.
  beforeEach(async () => {
    a = await api.account({ plan: 'scale', credits: GRANTED });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await first.stop();
    await second.stop();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  /** An openai route on a fake, with its own economy price (micro-USD per 1K image = usd * 1e6). */
  const route = (fake: OpenAiBatchFakeUpstream | null, economyUsd: number, withBatch = true) => ({
    type: 'openai',
    ...(fake ? { baseUrl: fake.baseUrl } : {}),
    model: 'compatible-image-1',
    cost: { '1K': 0.04, economy: { '1K': economyUsd } },
    ...(withBatch ? { batch } : {}),
  });

  /** A model on `routes` with an economy tier, and an economy batch of `prompts` on it. */
  async function economyOnChain(routes: object[], prompts: string[]): Promise<string> {
    const key = `economy-chain-${++models}`;
    await api
      .admin('post', '/v1/admin/models')
      .send({
        key,
        displayName: key,
        creditCost: { '1K': 2 },
        resolutionsByRatio: { '1:1': ['1K'] },
        routes,
        economyCreditCost: { '1K': 1 },
        economyWindowHours: 24,
      })
      .expect(201);
    return createBatch(api, a, { model: key, prompts, tier: 'economy', aspectRatio: '1:1', resolution: '1K' });
  }

  /** The one upstream batch a fake holds, once Kiln created it there. */
  async function createdOn(fake: OpenAiBatchFakeUpstream): Promise<string> {
    await waitFor('the upstream batch created', () => Promise.resolve(fake.batches.size === 1), 30_000);
    return [...fake.batches.keys()][0];
  }

  const routeIndexes = async (id: string) => (await taskRows(api, id)).map((t) => (t as unknown as { route_index: number }).route_index);

  it('economy prices are accepted when a later route of the chain runs batches, refused when none does', async () => {
    const refused = await api
      .admin('post', '/v1/admin/models')
      .send({
        key: 'economy-chain-none',
        displayName: 'economy-chain-none',
        creditCost: { '1K': 2 },
        resolutionsByRatio: { '1:1': ['1K'] },
        routes: [route(first, 0.01, false), route(second, 0.02, false)],
        economyCreditCost: { '1K': 1 },
        economyWindowHours: 24,
      })
      .expect(400);
    expect(refused.body.error).toMatchObject({
      code: 'invalid_request',
      details: { field: 'economyCreditCost', reason: 'route_batch_not_enabled' },
    });
  });

  it('the first route that runs batches serves them; its upstream batch failing moves what it never ran to the next batch route', async () => {
    first.batches.clear();
    second.batches.clear();
    // The marker: a batch that fails leaves the line unrun (the fake runs the others).
    const prompts = Array.from({ length: 5 }, (_, i) => `economy chain ${i} ${OPENAI_BATCH_FAKE_MARKERS.unfinished}`);
    // Route 0 renders in one call only; route 1 is the first batch route, route 2 the next.
    const id = await economyOnChain([route(null, 0.005, false), route(first, 0.011), route(second, 0.022)], prompts);
    const failing = await createdOn(first);
    expect(await routeIndexes(id)).toEqual(prompts.map(() => 1));
    await first.finish(failing, 'failed');
    const moved = await createdOn(second);
    await second.finish(moved, 'completed');
    await waitForBatchDone(api, id, 60_000);

    const tasks = await taskRows(api, id);
    expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
    expect(await routeIndexes(id)).toEqual(prompts.map(() => 2));
    // Priced by the route that made them, at its economy price.
    expect(tasks.map((t) => Number((t as unknown as { upstream_cost_micros: string }).upstream_cost_micros))).toEqual(
      prompts.map(() => 22_000),
    );
    // Each task in one upstream batch per route.
    const ids = tasks.map((t) => t.id).sort();
    expect(
      first
        .inputLines(failing)
        .map((l) => l.custom_id)
        .sort(),
    ).toEqual(ids);
    expect(
      second
        .inputLines(moved)
        .map((l) => l.custom_id)
        .sort(),
    ).toEqual(ids);
    await expectMoneyExact(api, a, id, GRANTED);
  });

  it('without a further batch route, what the failed upstream batch never ran fails and is refunded', async () => {
    first.batches.clear();
    second.batches.clear();
    second.requests.length = 0;
    const prompts = Array.from({ length: 3 }, (_, i) => `economy last ${i} ${OPENAI_BATCH_FAKE_MARKERS.unfinished}`);
    // The route after the batch route renders in one call only: economy tasks never go there.
    const id = await economyOnChain([route(first, 0.011), route(second, 0.022, false)], prompts);
    await first.finish(await createdOn(first), 'failed');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => 'failed'));
    expect(await routeIndexes(id)).toEqual(prompts.map(() => 0));
    expect(second.requests).toHaveLength(0);
    await expectMoneyExact(api, a, id, GRANTED);
  });
});
