import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { buildConfig, KilnConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import {
  GEMINI_BATCH_FAKE_MARKERS,
  GeminiBatchFakeUpstream,
  OPENAI_BATCH_FAKE_MARKERS,
  OpenAiBatchFakeUpstream,
  createBatch,
  download,
  fileEnvironment,
  solidPng,
  upload,
  FileEnvironment,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { economyBatch, expectMoneyExact } from './helpers/economy';

jest.setTimeout(120_000);

const GRANTED = 100_000;
const OPENAI_KEY = 'sk-economy-openai-0123456789';
const GEMINI_KEY = 'economy-gemini-key-0123456789';

/**
 * The economy tier end to end on the openai and gemini batch clients: the API, a real
 * generator (its collector), PostgreSQL, Redis, and the fake OpenAI Batch API and fake Gemini
 * batch API on 127.0.0.1. Each image made is stored as a standard task's result, a refused
 * line is refunded with content_refused, an upstream batch that expires refunds what it
 * never ran, each task is submitted upstream once, and the money is exact.
 */
describe('economy tier on the OpenAI and Gemini batch APIs', () => {
  const openai = new OpenAiBatchFakeUpstream({ completeAfterMs: null });
  const gemini = new GeminiBatchFakeUpstream({ completeAfterMs: null });
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule | null = null;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-economy-upstreams-'));

  // Not gpt-image-1: it makes only 1:1, 2:3 and 3:2 at 1K, and the test model offers more pairs; an unknown model gets the exact size.
  const batchSettings = { enabled: true, collectMs: 0, maxRequests: 1000, pollIntervalMs: 100 };
  const openaiRoute = (): ProviderRoute =>
    ({ type: 'openai', baseUrl: openai.baseUrl, model: 'compatible-image-1', batch: batchSettings }) as unknown as ProviderRoute;
  const geminiRoute = (): ProviderRoute =>
    ({ type: 'gemini', baseUrl: gemini.baseUrl, model: 'gemini-3.1-flash-image', batch: batchSettings }) as unknown as ProviderRoute;

  beforeAll(async () => {
    await openai.start();
    await gemini.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('economy_upstreams', {
      providerApiKeys: { OPENAI_API_KEY: OPENAI_KEY, GEMINI_API_KEY: GEMINI_KEY },
      upstream: { ...base.upstream, allowPrivate: true },
      storage: { ...base.storage, dataDir },
      generator: { concurrency: 4, maxAttempts: 3, backoffMs: 50, reconcileIntervalMs: 600_000, economyTickMs: 100, upstreamLeaseMs: 3000 },
    });
    config = env.config;
    api = await bootApi(config);
  });
  afterEach(async () => {
    await gen?.close();
    gen = null;
  });
  afterAll(async () => {
    await api?.close();
    await openai.stop();
    await gemini.stop();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function account(): Promise<TestAccount> {
    return api.account({ plan: 'scale', credits: GRANTED });
  }

  /** The one upstream batch the fake holds for these tasks, once Kiln recorded it. */
  async function recordedUpstreamBatch(batchId: string): Promise<string> {
    let recorded = '';
    await waitFor('the upstream batch recorded', async () => {
      const rows: { upstream_batch_id: string | null }[] = await api.db.query(
        `SELECT DISTINCT g.upstream_batch_id FROM upstream_batches g JOIN tasks t ON t.upstream_batch_id = g.id WHERE t.batch_id = $1`,
        [batchId],
      );
      recorded = rows[0]?.upstream_batch_id ?? '';
      return rows.length === 1 && recorded !== '';
    });
    return recorded;
  }

  it('openai: every line stored or refunded with its own code (a refusal content_refused), lines read out of order, each task submitted once; money exact', async () => {
    const a = await account();
    const M = OPENAI_BATCH_FAKE_MARKERS;
    const prompts = [...Array.from({ length: 6 }, (_, i) => `openai economy ${i}`), `refuse me ${M.refuse}`, `fail me ${M.fail}`];
    const id = await economyBatch(api, a, openaiRoute(), prompts);
    gen = await bootGenerator(config);
    const upstreamId = await recordedUpstreamBatch(id);
    const created = openai.batches.get(upstreamId)!;
    expect(created).toMatchObject({ endpoint: '/v1/images/generations', completion_window: '24h' });
    const [group] = await api.db.query(`SELECT id FROM upstream_batches WHERE upstream_batch_id = $1`, [upstreamId]);
    expect(created.metadata).toEqual({ kiln_group: group.id });
    expect(openai.requests.every((r) => r.headers.authorization === `Bearer ${OPENAI_KEY}`)).toBe(true);

    await openai.finish(upstreamId, 'completed');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    const ok = tasks.filter((t) => t.status === 'succeeded');
    expect(ok.map((t) => t.prompt).sort()).toEqual(prompts.slice(0, 6).sort());
    const file = await download(api, ok[0].result_url);
    const meta = await sharp(file.body).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['png', 128, 128]); // the real bytes' size
    expect(tasks.find((t) => t.prompt.includes(M.refuse))).toMatchObject({
      status: 'failed',
      error_code: 'content_refused',
      result_key: null,
    });
    expect(tasks.find((t) => t.prompt.includes(M.fail))).toMatchObject({ status: 'failed' });
    for (const t of tasks) expect(openai.submissions.get(t.id)).toBe(1);
    const [row] = await api.db.query(
      `SELECT state, outcome, succeeded_count, failed_count FROM upstream_batches WHERE upstream_batch_id = $1`,
      [upstreamId],
    );
    expect(row).toEqual({ state: 'read', outcome: 'completed', succeeded_count: 6, failed_count: 2 });
    await expectMoneyExact(api, a, id, GRANTED);
  });

  it('openai, through the API: a batch created with tier economy is charged the economy price, its refusal refunded at it; money exact', async () => {
    const a = await account();
    const M = OPENAI_BATCH_FAKE_MARKERS;
    await api
      .admin('patch', '/v1/admin/models/eta-image')
      .send({ provider: openaiRoute(), economyCreditCost: { '1K': 1 }, economyWindowHours: 24 })
      .expect(200);
    let id: string;
    try {
      id = await createBatch(api, a, {
        model: 'eta-image',
        prompts: ['api economy 1', 'api economy 2', `api refused ${M.refuse}`],
        tier: 'economy',
      });
    } finally {
      await api
        .admin('patch', '/v1/admin/models/eta-image')
        .send({ provider: { type: 'builtin' }, economyCreditCost: null, economyWindowHours: null })
        .expect(200);
    }
    const [created] = await api.db.query(`SELECT tier, unit_cost, credits_charged, expires_at FROM batches WHERE id = $1`, [id]);
    expect(created).toMatchObject({ tier: 'economy', unit_cost: 1 });
    expect(Number(created.credits_charged)).toBe(3);
    expect(created.expires_at).not.toBeNull();
    gen = await bootGenerator(config);
    const upstreamId = await recordedUpstreamBatch(id);
    await openai.finish(upstreamId, 'completed');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.filter((t) => t.status === 'succeeded')).toHaveLength(2);
    expect(tasks.find((t) => t.prompt.includes(M.refuse))).toMatchObject({ status: 'failed', error_code: 'content_refused' });
    await expectMoneyExact(api, a, id, GRANTED);
    expect(await api.balance(a.id)).toBe(GRANTED - 2);
  });

  it('openai: economy tasks with reference images are not batchable there: failed at once and refunded, never sent upstream', async () => {
    const a = await account();
    const ref = await upload(api, a, await solidPng(16, 16, { r: 0, g: 200, b: 0 }), 'ref.png');
    await api
      .admin('patch', '/v1/admin/models/eta-image')
      .send({ provider: openaiRoute(), economyCreditCost: { '1K': 1 }, economyWindowHours: 24 })
      .expect(200);
    let id: string;
    try {
      id = await createBatch(api, a, {
        model: 'eta-image',
        prompts: ['with a reference 1', 'with a reference 2'],
        refMode: 'combined',
        refImages: [ref],
        tier: 'economy',
      });
    } finally {
      await api
        .admin('patch', '/v1/admin/models/eta-image')
        .send({ provider: { type: 'builtin' }, economyCreditCost: null, economyWindowHours: null })
        .expect(200);
    }
    const uploadsBefore = openai.requests.filter((r) => r.path === '/v1/files').length;
    gen = await bootGenerator(config);
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    for (const t of tasks) {
      expect(t).toMatchObject({ status: 'failed', error: expect.stringContaining('cannot carry reference images') });
      expect(openai.submissions.get(t.id)).toBeUndefined();
    }
    expect(openai.requests.filter((r) => r.path === '/v1/files').length).toBe(uploadsBefore);
    await expectMoneyExact(api, a, id, GRANTED);
    expect(await api.balance(a.id)).toBe(GRANTED);
  });

  it('openai: an upstream batch that expires stores what it finished and refunds the lines it never ran, once', async () => {
    const a = await account();
    const M = OPENAI_BATCH_FAKE_MARKERS;
    const prompts = ['made 1', 'made 2', `late 1 ${M.unfinished}`, `late 2 ${M.unfinished}`];
    const id = await economyBatch(api, a, openaiRoute(), prompts);
    gen = await bootGenerator(config);
    const upstreamId = await recordedUpstreamBatch(id);
    await openai.finish(upstreamId, 'expired');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(
      tasks
        .filter((t) => t.status === 'succeeded')
        .map((t) => t.prompt)
        .sort(),
    ).toEqual(['made 1', 'made 2']);
    const lost = tasks.filter((t) => t.status === 'failed');
    expect(lost.map((t) => t.prompt).sort()).toEqual(prompts.slice(2).sort());
    for (const t of lost) expect(t.error_code).toBe('upstream_unavailable');
    await expectMoneyExact(api, a, id, GRANTED);
  });

  it('openai: a create whose answer never came (the crash window) is found again by its metadata, never made twice', async () => {
    const a = await account();
    const before = openai.batches.size;
    openai.hangAt = 'created'; // the batch is made upstream, its create never answered
    const route = { ...openaiRoute(), timeoutMs: 1000 } as unknown as ProviderRoute;
    const id = await economyBatch(api, a, route, ['window 1', 'window 2']);
    gen = await bootGenerator(config);
    const upstreamId = await recordedUpstreamBatch(id);
    expect(openai.batches.size).toBe(before + 1);
    expect(openai.requests.some((r) => r.path.startsWith('/v1/batches?limit='))).toBe(true);
    await openai.finish(upstreamId, 'completed');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.every((t) => t.status === 'succeeded')).toBe(true);
    for (const t of tasks) expect(openai.submissions.get(t.id)).toBe(1);
    await expectMoneyExact(api, a, id, GRANTED);
  });

  it('gemini: results stored, a blocked prompt refunded with content_refused, an expired batch refunding the rest; each key submitted once; money exact', async () => {
    const a = await account();
    const M = GEMINI_BATCH_FAKE_MARKERS;
    const prompts = ['gemini 1', 'gemini 2', `blocked ${M.refuse}`, `late ${M.unfinished}`];
    const id = await economyBatch(api, a, geminiRoute(), prompts);
    gen = await bootGenerator(config);
    const upstreamId = await recordedUpstreamBatch(id);
    const [group] = await api.db.query(`SELECT id FROM upstream_batches WHERE upstream_batch_id = $1`, [upstreamId]);
    expect(gemini.batches.get(upstreamId)).toMatchObject({ displayName: group.id, model: 'models/gemini-3.1-flash-image' });
    expect(gemini.requests.every((r) => r.headers['x-goog-api-key'] === GEMINI_KEY)).toBe(true);

    await gemini.finish(upstreamId, 'BATCH_STATE_EXPIRED');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(
      tasks
        .filter((t) => t.status === 'succeeded')
        .map((t) => t.prompt)
        .sort(),
    ).toEqual(['gemini 1', 'gemini 2']);
    expect(tasks.find((t) => t.prompt.includes(M.refuse))).toMatchObject({ status: 'failed', error_code: 'content_refused' });
    expect(tasks.find((t) => t.prompt.includes(M.unfinished))).toMatchObject({ status: 'failed', error_code: 'upstream_unavailable' });
    for (const t of tasks) expect(gemini.submissions.get(t.id)).toBe(1);
    await expectMoneyExact(api, a, id, GRANTED);
  });

  it('gemini: a create whose answer never came is found again by its displayName, never made twice', async () => {
    const a = await account();
    const before = gemini.batches.size;
    gemini.hangAt = 'created';
    const route = { ...geminiRoute(), timeoutMs: 1000 } as unknown as ProviderRoute;
    const id = await economyBatch(api, a, route, ['gemini window 1', 'gemini window 2']);
    gen = await bootGenerator(config);
    const upstreamId = await recordedUpstreamBatch(id);
    expect(gemini.batches.size).toBe(before + 1);
    await gemini.finish(upstreamId, 'BATCH_STATE_SUCCEEDED');
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.every((t) => t.status === 'succeeded')).toBe(true);
    for (const t of tasks) expect(gemini.submissions.get(t.id)).toBe(1);
    await expectMoneyExact(api, a, id, GRANTED);
  });
});
