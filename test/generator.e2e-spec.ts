import { TestingModule } from '@nestjs/testing';
import sharp from 'sharp';
import { DataSource } from 'typeorm';
import { BillingService } from '@app/billing';
import { KilnConfig } from '@app/config';
import { ModelConcurrencyLimiter, RetentionService, TaskReconcilerService, TaskRunnerService } from '@app/generation';
import { RedisService } from '@app/redis';
import { pixelSize } from '@app/providers';
import type { Resolution } from '@app/geometry';
import { StorageDriver } from '@app/storage';
import { BatchChangePublisher, ClaimedTask, TallyResult, TaskStateStore } from '@app/tasks';
import {
  TestApp,
  bearer,
  batchRow,
  countColour,
  createBatch,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  pixelAt,
  queueOf,
  recordSql,
  refundRows,
  routeModel,
  solidPng,
  taskRows,
  upload,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

const GREEN = { r: 0, g: 255, b: 0 };
const BLUE = { r: 0, g: 0, b: 255 };

jest.setTimeout(60_000);

describe('generator: the real worker consuming the real queue', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;

  beforeAll(async () => {
    env = await fileEnvironment('gen', {
      // This file counts attempts exactly. On a loaded machine (CI's full suite beside a
      // browser test) a Redis answer past the 500 ms default fails the slot waiters of that
      // moment, and their tasks rightly spend an attempt (a lost dependency is retried): a
      // second attempt seen by the mixed-429s test in CI. Here Redis is allowed 5 s.
      redisCommandTimeoutMs: 5000,
      // The reconciler is driven by hand here, so its scheduled passes stay out of the way.
      generator: { concurrency: 8, maxAttempts: 3, backoffMs: 30, reconcileIntervalMs: 600_000, taskLeaseMs: 2000 },
    });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await env?.teardown();
  });

  it('builtin: exact pixel sizes for several ratios and resolutions, a preview, status succeeded', async () => {
    const a = await api.account({ credits: 1000 });
    const sizes: [string, Resolution][] = [
      ['1:1', '1K'],
      ['16:9', '1K'],
      ['21:9', '1K'],
      ['2:3', '2K'],
      ['4:5', '4K'],
    ];
    const ids = await Promise.all(
      sizes.map(([aspectRatio, resolution]) =>
        createBatch(api, a, { model: 'alpha-image-2', prompts: [`A lighthouse at ${aspectRatio} ${resolution}`], aspectRatio, resolution }),
      ),
    );
    await Promise.all(ids.map((id) => waitForBatchDone(api, id, 45_000)));

    for (const [i, id] of ids.entries()) {
      const { batch, tasks } = await getBatch(api, a, id);
      expect(batch).toMatchObject({
        status: 'succeeded',
        done: true,
        creditsRefunded: 0,
        counts: { succeeded: 1, pending: 0, running: 0, failed: 0 },
      });
      expect(tasks[0]).toMatchObject({ status: 'succeeded', progress: 100, error: null });
      expect(tasks[0].resultUrls).toHaveLength(1);
      const file = await download(api, tasks[0].resultUrls[0]);
      expect(file.status).toBe(200);
      const meta = await sharp(file.body).metadata();
      expect(meta.format).toBe('png');
      expect({ width: meta.width, height: meta.height }).toEqual(pixelSize(sizes[i][0], sizes[i][1]));

      expect(batch.previewUrl).toMatch(/^http:\/\/kiln\.test\/files\/previews\//);
      const preview = await download(api, batch.previewUrl);
      expect(preview.status).toBe(200);
      const pm = await sharp(preview.body).metadata();
      expect(pm.format).toBe('webp');
      expect(Math.max(pm.width, pm.height)).toBe(256);
    }
    const row = await batchRow(api, ids[0]);
    expect(row.succeeded_count).toBe(1);
    expect(row.finished_at).not.toBeNull();
  }, 90_000);

  it('the generator commits asynchronously (its writes are fenced and redone on loss); the api never does', async () => {
    const [gen_] = await gen.get(DataSource).query('SHOW synchronous_commit');
    const [api_] = await api.db.query('SHOW synchronous_commit');
    // Behind a transaction-mode pooler (npm run test:pgbouncer) Kiln sets no session settings:
    // the pooler's server connections keep the server's default.
    expect(gen_.synchronous_commit).toBe(config.databasePreparedStatements ? 'off' : 'on');
    expect(api_.synchronous_commit).toBe('on');
  });

  it('statement_timeout is DATABASE_QUERY_TIMEOUT_MS on the connections, from Kiln or from a pooler', async () => {
    const [{ ms }] = await api.db.query(`SELECT extract(epoch FROM current_setting('statement_timeout')::interval) * 1000 AS ms`);
    // Behind test:pgbouncer's pooler Kiln sends none: the pooler sets it (connect_query), as docs/operations.md says to.
    expect(Number(ms)).toBe(config.databaseQueryTimeoutMs);
  });

  it('one preview per batch: a first wave of images finishing together makes one thumbnail, not one each', async () => {
    const a = await api.account({ credits: 1000 });
    const restore = await routeModel(api, 'gamma-5-flash', { type: 'simulated', latencyMs: 30 });
    const put = jest.spyOn(gen.get(StorageDriver), 'put');
    try {
      const id = await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['wave'], countPerCombo: 16 });
      await waitForBatchDone(api, id);
      const previews = put.mock.calls.map((c) => c[0]).filter((key) => key.startsWith('previews/'));
      expect(previews).toHaveLength(1);
      const { batch } = await getBatch(api, a, id);
      expect(batch).toMatchObject({ status: 'succeeded', counts: { succeeded: 16, pending: 0, running: 0, failed: 0 } });
      expect(batch.previewUrl).toContain(previews[0]);
    } finally {
      put.mockRestore();
      await restore();
    }
  });

  it("a run whose image cannot be stored drops the preview it made; the retry makes the batch's preview", async () => {
    const a = await api.account({ credits: 1000 });
    const storage = gen.get(StorageDriver);
    const realPut = storage.put.bind(storage);
    let failed = false;
    const put = jest.spyOn(storage, 'put').mockImplementation(async (key, body, type) => {
      if (!failed && key.startsWith('results/')) {
        failed = true;
        throw new Error('disk full');
      }
      return realPut(key, body, type);
    });
    try {
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['stored on the second try'] });
      await waitForBatchDone(api, id);
      const { batch, tasks } = await getBatch(api, a, id);
      expect(failed).toBe(true);
      expect(batch).toMatchObject({ status: 'succeeded', counts: { succeeded: 1 } });
      expect((await taskRows(api, id))[0].attempts).toBe(2);
      // Two previews were made (one per attempt); the first was removed with its failed run.
      const previews = put.mock.calls.map((c) => c[0]).filter((key) => key.startsWith('previews/'));
      expect(previews).toHaveLength(2);
      expect(batch.previewUrl).toContain(previews[1]);
      expect(await storage.exists(previews[0])).toBe(false);
      expect((await download(api, batch.previewUrl)).status).toBe(200);
      expect((await download(api, tasks[0].resultUrls[0])).status).toBe(200);
    } finally {
      put.mockRestore();
    }
  });

  it("a model's route may set its own upstream cap (maxConcurrency): never more calls in flight than that", async () => {
    const a = await api.account({ credits: 1000 });
    const limiter = gen.get(ModelConcurrencyLimiter);
    const restore = await routeModel(api, 'gamma-5-flash', { type: 'simulated', latencyMs: 80, maxConcurrency: 2 });
    try {
      const id = await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['capped'], countPerCombo: 8 });
      let peak = 0;
      let done = false;
      const sampling = (async () => {
        while (!done) {
          peak = Math.max(peak, await limiter.inUse('gamma-5-flash'));
          await new Promise((r) => setTimeout(r, 10));
        }
      })();
      await waitForBatchDone(api, id);
      done = true;
      await sampling;
      // The generator runs 8 at once; only the route's cap keeps the upstream at 2.
      expect(peak).toBe(2);
      expect((await getBatch(api, a, id)).batch).toMatchObject({ status: 'succeeded', counts: { succeeded: 8 } });
    } finally {
      await restore();
    }
  });

  it('builtin: background is honoured only by models that support it', async () => {
    const a = await api.account({ credits: 1000 });
    const [transparent, coloured, unsupported] = await Promise.all([
      createBatch(api, a, { model: 'alpha-image-2', prompts: ['Transparent sticker'], background: 'transparent' }),
      createBatch(api, a, { model: 'alpha-image-2', prompts: ['Red poster'], background: '#FF0000' }),
      createBatch(api, a, { model: 'eta-image', prompts: ['No background support'], background: 'transparent' }),
    ]);
    await Promise.all([transparent, coloured, unsupported].map((id) => waitForBatchDone(api, id)));
    const image = async (id: string) => download(api, (await getBatch(api, a, id)).tasks[0].resultUrls[0]).then((f) => f.body);

    const t = await image(transparent);
    expect((await sharp(t).metadata()).hasAlpha).toBe(true);
    expect((await pixelAt(t, 0, 0))[3]).toBe(0);
    expect((await pixelAt(t, 1023, 1023))[3]).toBe(0);
    expect(await pixelAt(await image(coloured), 0, 0)).toEqual([255, 0, 0, 255]);
    expect((await pixelAt(await image(unsupported), 0, 0))[3]).toBe(255);
  });

  it('builtin: reference images really appear in the output (combined and each)', async () => {
    const a = await api.account({ credits: 1000 });
    const green = await upload(api, a, await solidPng(64, 64, GREEN), 'green.png');
    const blue = await upload(api, a, await solidPng(64, 64, BLUE), 'blue.png');
    const combined = await createBatch(api, a, {
      model: 'alpha-image-2',
      prompts: ['Both refs'],
      refMode: 'combined',
      refImages: [green, blue],
    });
    const each = await createBatch(api, a, {
      model: 'alpha-image-2',
      prompts: ['One ref each'],
      refMode: 'each',
      refImages: [green, blue],
    });
    await Promise.all([waitForBatchDone(api, combined), waitForBatchDone(api, each)]);

    const both = await download(api, (await getBatch(api, a, combined)).tasks[0].resultUrls[0]);
    expect(await countColour(both.body, GREEN)).toBeGreaterThan(1000);
    expect(await countColour(both.body, BLUE)).toBeGreaterThan(1000);

    const { tasks } = await getBatch(api, a, each);
    expect(tasks).toHaveLength(2);
    const first = (await download(api, tasks[0].resultUrls[0])).body;
    const second = (await download(api, tasks[1].resultUrls[0])).body;
    expect(await countColour(first, GREEN)).toBeGreaterThan(1000);
    expect(await countColour(first, BLUE)).toBe(0);
    expect(await countColour(second, BLUE)).toBeGreaterThan(1000);
    expect(await countColour(second, GREEN)).toBe(0);
  });

  it('simulated, every task failing: status failed, each task refunded once, balance == ledger', async () => {
    const a = await api.account({ credits: 200 });
    const id = await createBatchVia(
      api,
      a,
      'beta-pro',
      { type: 'simulated', latencyMs: 10, failureRate: 1 },
      { prompts: ['a', 'b', 'c', 'd', 'e', 'f'] },
    );
    await waitForBatchDone(api, id);
    const { batch, tasks } = await getBatch(api, a, id);
    expect(batch).toMatchObject({ status: 'failed', done: true, creditsCharged: 30, creditsRefunded: 30, previewUrl: null });
    expect(tasks.every((t) => t.status === 'failed' && t.error === 'Simulated upstream failure' && t.resultUrls.length === 0)).toBe(true);
    const refunds = await refundRows(api, id);
    expect(refunds).toHaveLength(6);
    expect(new Set(refunds.map((r) => r.task_id))).toEqual(new Set(tasks.map((t) => t.id)));
    expect(refunds.every((r) => Number(r.amount) === 5)).toBe(true);
    expect(await api.balance(a.id)).toBe(200);
    expect(await api.ledgerSum(a.id)).toBe(200);
    expect(await api.app.get(BillingService).creditsUsedToday(a.keyId)).toBe(0);
  });

  it('simulated, failures and 429s mixed: partial, exact refund sum, retried tasks', async () => {
    const a = await api.account({ plan: 'scale', credits: 1000 });
    const restore = await routeModel(api, 'zeta-image-2-1', {
      type: 'simulated',
      latencyMs: { min: 5, max: 25 },
      failureRate: 0.4,
      rateLimitRate: 0.2,
    });
    let id: string;
    try {
      id = await createBatch(api, a, { model: 'zeta-image-2-1', prompts: Array.from({ length: 10 }, (_, i) => `p${i}`), countPerCombo: 4 });
    } finally {
      await restore();
    }
    await waitForBatchDone(api, id);
    const { batch, tasks } = await getBatch(api, a, id);
    const failed = tasks.filter((t) => t.status === 'failed');
    const succeeded = tasks.filter((t) => t.status === 'succeeded');
    expect(failed.length + succeeded.length).toBe(40);
    expect(failed.length).toBeGreaterThan(0);
    expect(succeeded.length).toBeGreaterThan(0);
    expect(batch).toMatchObject({ status: 'partial', done: true, creditsCharged: 160, creditsRefunded: failed.length * 4 });
    for (const t of failed) {
      expect(t.error).toMatch(
        /^(Simulated upstream failure|Upstream rate limit.*|Simulated rate limit \(429\) \(gave up after 3 attempts\))$/,
      );
    }
    const refunds = await refundRows(api, id);
    expect(refunds).toHaveLength(failed.length);
    expect(new Set(refunds.map((r) => r.task_id))).toEqual(new Set(failed.map((t) => t.id)));
    expect(await api.balance(a.id)).toBe(1000 - 160 + failed.length * 4);
    expect(await api.ledgerSum(a.id)).toBe(await api.balance(a.id));
    expect(await api.app.get(BillingService).creditsUsedToday(a.keyId)).toBe(160 - failed.length * 4);

    const rows = await taskRows(api, id);
    // Each call is a 429 with probability 0.2 (some of the 40 tasks met one: all escaping has
    // probability 0.8^40, about 1e-4): a 429 is Kiln going too fast for the route, asked again
    // within the attempt (route pacing), and the failures are not retryable, so no task spent
    // a second attempt. The openai file checks a 429 followed by success deterministically.
    expect(
      rows.filter((r) => r.attempts !== 1).map((r) => ({ seq: r.seq, attempts: r.attempts, status: r.status, error: r.error })),
    ).toEqual([]);
    const row = await batchRow(api, id);
    expect({ s: row.succeeded_count, f: row.failed_count }).toEqual({ s: succeeded.length, f: failed.length });
  });

  it("the model slot limiter: a dead worker's leases expire, releases free slots, waiters go by priority", async () => {
    const redis = gen.get(RedisService);
    const limiter = new ModelConcurrencyLimiter(redis, { ...config, generator: { ...config.generator, modelConcurrencyCap: 2 } });
    const model = `limiter-test-${Date.now()}`;
    const key = limiter.slotsKey(model);
    // A replica killed while holding both slots: its leases run out 400 ms from now.
    const [sec, micro] = await redis.client.time();
    const now = Number(sec) * 1000 + Math.floor(Number(micro) / 1000);
    await redis.client.zadd(key, now + 400, 'dead:1', now + 400, 'dead:2');
    const started = Date.now();
    const first = await limiter.acquire(model);
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    const second = await limiter.acquire(model);
    expect(await limiter.inUse(model)).toBe(2);

    const order: number[] = [];
    const waiters = [5, 1, 3].map((priority) => limiter.acquire(model, { priority }).then((lease) => (order.push(priority), lease)));
    await new Promise((r) => setTimeout(r, 100));
    expect(order).toEqual([]);
    first.release();
    second.release();
    const leases = [await waiters[1], await waiters[2]];
    expect(order).toEqual([1, 3]);
    leases[0].release();
    (await waiters[0]).release();
    leases[1].release();
    expect(order).toEqual([1, 3, 5]);
    await waitFor('the slots to be free', async () => (await limiter.inUse(model)) === 0);
  });

  describe('with the queue paused, deliveries by hand', () => {
    let runner: TaskRunnerService;
    beforeAll(async () => {
      runner = gen.get(TaskRunnerService);
      await queueOf(gen).pause(true);
    });
    afterAll(async () => {
      await queueOf(gen).resume(true);
    });

    it('a job delivered twice (or three times at once) refunds once and never re-renders a finished task', async () => {
      const a = await api.account({ credits: 500 });
      const restore = await routeModel(api, 'beta-pro', { type: 'simulated', latencyMs: 30, failureRate: 1 });
      let failing: string;
      try {
        failing = await createBatch(api, a, { model: 'beta-pro', prompts: ['x', 'y'] });
      } finally {
        await restore();
      }
      const fine = await createBatch(api, a, { model: 'eta-image', prompts: ['one', 'two'] });
      const all = [...(await taskRows(api, failing)), ...(await taskRows(api, fine))];
      expect(all.every((t) => t.status === 'queued')).toBe(true);

      for (const task of all) {
        const outcomes = await Promise.all([runner.run(task.id), runner.run(task.id), runner.run(task.id)]);
        const terminal = outcomes.filter((o) => o === 'succeeded' || o === 'failed');
        expect(terminal).toHaveLength(1);
        expect(outcomes.filter((o) => o !== terminal[0]).every((o) => o === 'superseded' || o === 'skipped')).toBe(true);
      }
      const before = [...(await taskRows(api, failing)), ...(await taskRows(api, fine))];
      // Delivered again after the fact: nothing happens, nothing is rendered or refunded again.
      for (const task of all) expect(await runner.run(task.id)).toBe('skipped');
      const after = [...(await taskRows(api, failing)), ...(await taskRows(api, fine))];
      expect(after).toEqual(before);

      expect((await getBatch(api, a, failing)).batch).toMatchObject({ status: 'failed', creditsRefunded: 10 });
      expect((await getBatch(api, a, fine)).batch).toMatchObject({ status: 'succeeded', creditsRefunded: 0 });
      expect(await refundRows(api, failing)).toHaveLength(2);
      expect(await api.balance(a.id)).toBe(500 - 10 - 2 + 10);
      expect(await api.ledgerSum(a.id)).toBe(await api.balance(a.id));
    });

    it("a job naming its task's batch claims and sends in one write once it holds the slot; without, claim then send", async () => {
      const a = await api.account({ credits: 1000 });
      const restore = await routeModel(api, 'gamma-5-flash', { type: 'simulated', latencyMs: 600, maxConcurrency: 1 });
      try {
        const hinted = await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['hinted'], countPerCombo: 3 });
        const plain = await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['plain'], countPerCombo: 3 });
        const hintedTasks = await taskRows(api, hinted);
        const plainTasks = await taskRows(api, plain);

        // Hinted: one run holds the slot (claimed and sent in one statement, no send of its
        // own); the others wait unclaimed, still queued.
        const statements = recordSql();
        const hintedRuns = hintedTasks.map((t) => runner.run(t.id, { batchId: hinted, seq: t.seq }));
        await waitFor('one hinted task running', async () => (await taskRows(api, hinted)).some((t) => t.status === 'running'));
        const during = await taskRows(api, hinted);
        statements.restore();
        expect(during.filter((t) => t.status === 'running' && t.sent_at !== null && t.progress === 1)).toHaveLength(1);
        expect(during.filter((t) => t.status === 'queued' && t.attempts === 0 && t.sent_at === null)).toHaveLength(2);
        const sql = statements.statements();
        expect(sql.filter((q) => q.includes('), claimed AS (')).length).toBeGreaterThanOrEqual(1);
        expect(sql.filter((q) => q.includes('), sent AS ('))).toHaveLength(0);

        // A cancel takes the waiting ones; their runs find nothing to claim and send nothing.
        await api.http.post(`/v1/batches/${hinted}/cancel`).set('Authorization', bearer(a)).expect(200);
        const hintedOutcomes = await Promise.all(hintedRuns);
        expect(hintedOutcomes.sort()).toEqual(['skipped', 'skipped', 'succeeded']);
        const hintedAfter = await taskRows(api, hinted);
        expect(hintedAfter.filter((t) => t.status === 'cancelled' && t.sent_at === null && t.attempts === 0)).toHaveLength(2);

        // Without hints (jobs added before they carried them): all three claimed, one sent at a time.
        const plainRuns = plainTasks.map((t) => runner.run(t.id));
        await waitFor('three plain claims, one sent', async () => {
          const rows = await taskRows(api, plain);
          return rows.every((t) => t.status === 'running') && rows.filter((t) => t.sent_at).length === 1;
        });
        await api.http.post(`/v1/batches/${plain}/cancel`).set('Authorization', bearer(a)).expect(200);
        expect((await Promise.all(plainRuns)).sort()).toEqual(['succeeded', 'unsent', 'unsent']);

        // Each batch charged for its one image; the money adds up.
        for (const id of [hinted, plain])
          expect((await getBatch(api, a, id)).batch).toMatchObject({ status: 'cancelled', counts: { succeeded: 1, cancelled: 2 } });
        expect(await api.ledgerSum(a.id)).toBe(await api.balance(a.id));
      } finally {
        await restore();
      }
    });

    it('a hint naming another batch claims nothing and changes nothing; a hinted retry keeps its hints', async () => {
      const a = await api.account({ credits: 1000 });
      const mine = await createBatch(api, a, { model: 'eta-image', prompts: ['mine'] });
      const other = await createBatch(api, a, { model: 'eta-image', prompts: ['other'] });
      const [task] = await taskRows(api, mine);
      expect(await runner.run(task.id, { batchId: other, seq: 0 })).toBe('skipped');
      expect((await taskRows(api, mine))[0]).toMatchObject({ status: 'queued', attempts: 0, sent_at: null });
      expect(await runner.run(task.id, { batchId: mine, seq: 0 })).toBe('succeeded');
      expect((await taskRows(api, mine))[0]).toMatchObject({ status: 'succeeded', attempts: 1 });

      // A batch whose route this generator cannot make a provider of (a manual repair gone
      // wrong): the hinted run fails it for good and refunds it, as the claim-first run does.
      const broken = await createBatch(api, a, { model: 'eta-image', prompts: ['broken'] });
      await api.db.query(`UPDATE batches SET provider = '{"type":"no-such-type"}'::jsonb WHERE id = $1`, [broken]);
      const [brokenTask] = await taskRows(api, broken);
      expect(await runner.run(brokenTask.id, { batchId: broken, seq: 0 })).toBe('failed');
      expect((await getBatch(api, a, broken)).tasks[0]).toMatchObject({ status: 'failed', errorCode: 'provider_not_configured' });
      expect(await refundRows(api, broken)).toHaveLength(1);

      // A retry's job carries the hints on (the retry path adds it from the claim).
      const again = await createBatch(api, a, { model: 'eta-image', prompts: ['again'] });
      const [retried] = await taskRows(api, again);
      const storage = gen.get(StorageDriver);
      const put = jest.spyOn(storage, 'put').mockImplementationOnce(() => Promise.reject(new Error('disk full')));
      try {
        expect(await runner.run(retried.id, { batchId: again, seq: 0 })).toBe('retrying');
      } finally {
        put.mockRestore();
      }
      const job = await queueOf(gen).getJob(`${retried.id}-attempt2`);
      expect(job?.data).toEqual({ taskId: retried.id, batchId: again, seq: 0, rerun: true });
      await job?.remove();
      expect(await runner.run(retried.id, { batchId: again, seq: 0 })).toBe('succeeded');
      expect((await taskRows(api, again))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
    });

    it('claims and successes arriving together share statements; tallies stay exact and stale attempts change nothing', async () => {
      const store = gen.get(TaskStateStore);
      const a = await api.account({ credits: 1000 });
      const b = await api.account({ credits: 1000 });
      const ids = [
        await createBatch(api, a, { model: 'eta-image', prompts: ['g'], countPerCombo: 12 }),
        await createBatch(api, b, { model: 'eta-image', prompts: ['h'], countPerCombo: 12 }),
        await createBatch(api, b, { model: 'eta-image', prompts: ['i'], countPerCombo: 6 }),
      ];
      const tasks = (await Promise.all(ids.map((id) => taskRows(api, id)))).flat();
      const statements = recordSql();
      let claims: (ClaimedTask | null)[];
      try {
        // Every task at once, and the first one twice: a duplicate delivery in the same group.
        claims = await Promise.all([...tasks.map((t) => store.claim(t.id)), store.claim(tasks[0].id)]);
      } finally {
        statements.restore();
      }
      const claimStatements = statements.statements().filter((sql) => sql.includes('), claimed AS ('));
      expect(claimStatements.length).toBeGreaterThanOrEqual(1);
      expect(claimStatements.length).toBeLessThanOrEqual(3);
      expect(claims.slice(0, tasks.length).every((c) => c !== null && c.attempts === 1 && c.batch?.model === 'eta-image')).toBe(true);
      expect(claims[tasks.length]).toBeNull();
      for (const id of ids) expect((await batchRow(api, id)).status).toBe('running');

      // Taken over once more: its first attempt's success is stale and must change nothing.
      const takenOver = (await store.claim(tasks[1].id))!;
      expect(takenOver.attempts).toBe(2);
      const success = (c: ClaimedTask, attempt = c.attempts) => ({
        fence: { taskId: c.id, attempt, batchId: c.batchId },
        batchId: c.batchId,
        resultUrl: `http://kiln.test/files/results/${c.id}/${attempt}.png`,
        resultKey: `results/${c.id}/${attempt}.png`,
        width: 64,
        height: 64,
        previewUrl: c.seq === 0 ? `http://kiln.test/files/previews/${c.batchId}.webp` : null,
      });
      const current = claims.slice(0, tasks.length).map((c) => (c!.id === takenOver.id ? takenOver : c!));
      const spied = recordSql();
      let tallies: (TallyResult | null)[];
      try {
        tallies = await Promise.all([store.succeed(success(takenOver, 1)), ...current.map((c) => store.succeed(success(c)))]);
      } finally {
        spied.restore();
      }
      const successStatements = spied.statements().filter((sql) => sql.includes('), done AS ('));
      expect(successStatements.length).toBeGreaterThanOrEqual(1);
      expect(successStatements.length).toBeLessThanOrEqual(3);
      expect(tallies[0]).toBeNull();
      expect(tallies.slice(1).every((t) => t !== null)).toBe(true);
      // The batch that finished is reported finished once, whichever of its tasks ended it.
      const finished = tallies.slice(1).map((t, i) => ({ batchId: current[i].batchId, finished: t!.finished }));
      for (const id of ids) expect(finished.filter((f) => f.batchId === id && f.finished)).toHaveLength(1);

      for (const [n, id] of ids.entries()) {
        const row = await batchRow(api, id);
        expect(row).toMatchObject({ status: 'succeeded', succeeded_count: [12, 12, 6][n], failed_count: 0 });
        expect(row.finished_at).not.toBeNull();
        expect(row.preview_url).toBe(`http://kiln.test/files/previews/${id}.webp`);
      }
      const again = await taskRows(api, ids[0]);
      expect(again[1]).toMatchObject({ status: 'succeeded', attempts: 2, result_key: `results/${again[1].id}/2.png` });
      expect(again.every((t) => t.status === 'succeeded' && t.progress === 100)).toBe(true);
    });

    it('two generators recording successes of the same batches at once neither deadlock nor miscount', async () => {
      const here = gen.get(TaskStateStore);
      // A second replica: its own store on its own connection pool.
      const there = new TaskStateStore(api.db, api.app.get(BillingService), api.app.get(BatchChangePublisher));
      const a = await api.account({ credits: 5000 });
      const ids = await Promise.all(
        ['p', 'q', 'r', 's'].map((prompt) => createBatch(api, a, { model: 'eta-image', prompts: [prompt], countPerCombo: 20 })),
      );
      const tasks = (await Promise.all(ids.map((id) => taskRows(api, id)))).flat();
      const claims = await Promise.all(tasks.map((t, i) => (i % 2 ? there : here).claim(t.id)));
      // Interleaved so each replica's groups hold tasks of every batch, in different orders.
      const shuffled = claims.map((c, i) => ({ c: c!, key: (i * 37) % claims.length })).sort((x, y) => x.key - y.key);
      const tallies = await Promise.all(
        shuffled.map(({ c }, i) =>
          (i % 2 ? there : here).succeed({
            fence: { taskId: c.id, attempt: c.attempts, batchId: c.batchId },
            batchId: c.batchId,
            resultUrl: `http://kiln.test/files/results/${c.id}/r.png`,
            resultKey: `results/${c.id}/r.png`,
            width: 64,
            height: 64,
            previewUrl: null,
          }),
        ),
      );
      expect(tallies.every((t) => t !== null)).toBe(true);
      for (const id of ids) {
        expect(await batchRow(api, id)).toMatchObject({ status: 'succeeded', succeeded_count: 20, failed_count: 0 });
      }
    });

    it('a refund the ledger already holds is treated as done, not as an error', async () => {
      const a = await api.account({ credits: 100 });
      const id = await createBatchVia(api, a, 'beta-pro', { type: 'simulated', failureRate: 1 }, { prompts: ['only'] });
      const [task] = await taskRows(api, id);
      const billing = api.app.get(BillingService);
      await api.db.transaction((m) => billing.refundTask(m, { accountId: a.id, batchId: id, taskId: task.id, amount: 5 }));
      expect(await runner.run(task.id)).toBe('failed');
      expect(await refundRows(api, id)).toHaveLength(1);
      expect(await api.balance(a.id)).toBe(100);
      expect(await api.ledgerSum(a.id)).toBe(100);
      expect((await taskRows(api, id))[0]).toMatchObject({ status: 'failed', error: 'Simulated upstream failure' });
    });

    it('the reconciler re-enqueues tasks whose jobs are gone, takes over abandoned running tasks, finishes settled batches', async () => {
      const a = await api.account({ credits: 500 });
      const lost = await createBatch(api, a, { model: 'eta-image', prompts: ['lost 1', 'lost 2', 'lost 3'] });
      const abandoned = await createBatch(api, a, { model: 'eta-image', prompts: ['abandoned'] });
      const neverQueued = await createBatch(api, a, { model: 'eta-image', prompts: ['never queued'] });
      const unsettled = await createBatch(api, a, { model: 'eta-image', prompts: ['unsettled'] });
      const queue = queueOf(gen);
      // Redis loses every job (as after a flush); the database still says queued.
      await queue.empty();
      expect(await queue.getWaitingCount()).toBe(0);
      // A worker took one task and died, and its job is gone too.
      await api.db.query(`UPDATE tasks SET status = 'running', attempts = 1, updated_at = now() - interval '1 hour' WHERE batch_id = $1`, [
        abandoned,
      ]);
      // One never reached the queue: the feeder's, not the reconciler's, to enqueue.
      await api.db.query(`UPDATE tasks SET status = 'pending', updated_at = now() - interval '1 hour' WHERE batch_id = $1`, [neverQueued]);
      // One batch's task is terminal but the batch was never marked finished.
      await api.db.query(`UPDATE tasks SET status = 'succeeded', progress = 100, finished_at = now() WHERE batch_id = $1`, [unsettled]);

      const reconciler = gen.get(TaskReconcilerService);
      reconciler.queuedGraceMs = 0;
      try {
        const report = await reconciler.reconcileOnce();
        expect(report.reenqueued).toBeGreaterThanOrEqual(4);
        expect(report.finishedBatches).toBeGreaterThanOrEqual(1);
        // A second pass finds nothing more to do: the jobs it added are live.
        const again = await reconciler.reconcileOnce();
        expect(again.reenqueued).toBe(0);
      } finally {
        reconciler.queuedGraceMs = 5000;
      }
      expect((await batchRow(api, unsettled)).status).toBe('succeeded');

      await queue.resume(true);
      try {
        await Promise.all([lost, abandoned, neverQueued].map((id) => waitForBatchDone(api, id)));
      } finally {
        await queue.pause(true);
      }
      for (const id of [lost, abandoned, neverQueued]) {
        expect((await getBatch(api, a, id)).batch).toMatchObject({ status: 'succeeded', done: true });
      }
      const [taken] = await taskRows(api, abandoned);
      expect(taken).toMatchObject({ status: 'succeeded', attempts: 2 });
    });

    it("a crashed generator's task is taken over first in a pass, and a backlog of waiting jobs costs no job reads", async () => {
      const a = await api.account({ credits: 500 });
      // A backlog: queued tasks whose jobs wait, never delivered (the queue is paused).
      const backlog = await createBatch(api, a, { model: 'eta-image', prompts: ['w1', 'w2', 'w3', 'w4', 'w5', 'w6'], countPerCombo: 5 });
      const waiting = await taskRows(api, backlog);
      expect(waiting.every((t) => t.status === 'queued')).toBe(true);
      // A worker took one task and died: its job is gone and its lease long past.
      const crashed = await createBatch(api, a, { model: 'eta-image', prompts: ['crashed'] });
      const queue = queueOf(gen);
      const [task] = await taskRows(api, crashed);
      await (await queue.getJob(task.id))?.remove();
      await api.db.query(`UPDATE tasks SET status = 'running', attempts = 1, updated_at = now() - interval '1 hour' WHERE id = $1`, [
        task.id,
      ]);

      const reconciler = gen.get(TaskReconcilerService);
      reconciler.queuedGraceMs = 0;
      const read = jest.spyOn(queue, 'getJob');
      try {
        const report = await reconciler.reconcileOnce();
        expect(report.reenqueued).toBeGreaterThanOrEqual(1);
        const ids = read.mock.calls.map(([id]) => String(id));
        // Its jobs (the dead attempt's, the next one's) are the pass's first reads...
        expect(ids.slice(0, 2)).toEqual([task.id, `${task.id}-attempt2`]);
        // ...and no waiting job of the backlog was read one by one.
        for (const t of waiting) expect(ids).not.toContain(t.id);
      } finally {
        read.mockRestore();
        reconciler.queuedGraceMs = 5000;
      }
      const readded = await queue.getJob(`${task.id}-attempt2`);
      expect(await readded?.getState()).toBe('waiting');
      // A rerun: first in the generator's local lines, not behind newer batches' lower seqs.
      expect(readded?.data).toMatchObject({ taskId: task.id, rerun: true });
      // At the front of the queue, not behind the backlog: the next job a worker takes (Bull's workers take the list's tail).
      expect(await queue.client.lindex(queue.toKey('wait'), -1)).toBe(`${task.id}-attempt2`);
      await queue.resume(true);
      try {
        await Promise.all([crashed, backlog].map((id) => waitForBatchDone(api, id)));
      } finally {
        await queue.pause(true);
      }
      expect((await taskRows(api, crashed))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
    });

    it("a task past its lease whose job a dead worker's lock still holds is reported as awaiting the lock (the next pass comes sooner), then taken over once it expires; a lock renewed on time is not", async () => {
      const a = await api.account({ credits: 100 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['locked by the dead'] });
      const queue = queueOf(gen);
      const [task] = await taskRows(api, id);
      const job = (await queue.getJob(task.id))!;
      // Delivered to a worker that then died: active, its lock not yet expired, its lease past.
      await queue.client
        .multi()
        .lrem(queue.toKey('wait'), 0, job.id)
        .lrem(queue.toKey('paused'), 0, job.id)
        .lpush(queue.toKey('active'), job.id)
        .hset(queue.toKey(String(job.id)), 'processedOn', String(Date.now()))
        .set(job.lockKey(), 'a-worker', 'PX', 18_000)
        .exec();
      expect(await job.getState()).toBe('active');
      await api.db.query(`UPDATE tasks SET status = 'running', attempts = 1, updated_at = now() - interval '1 hour' WHERE id = $1`, [
        task.id,
      ]);
      const reconciler = gen.get(TaskReconcilerService);
      // A lock renewed on time (more than half the lock duration left): a live worker's slow render, not awaited.
      expect(await reconciler.reconcileOnce()).toMatchObject({ reenqueued: 0, awaitingLocks: 0 });
      // A lock that missed its renewal: its worker is gone, the takeover awaits its expiry.
      await queue.client.pexpire(job.lockKey(), 3000);
      expect(await reconciler.reconcileOnce()).toMatchObject({ reenqueued: 0, awaitingLocks: 1 });
      // The lock expires (delivered a lock duration ago, no lock key): the next pass takes the task over.
      await queue.client
        .multi()
        .del(job.lockKey())
        .hset(queue.toKey(String(job.id)), 'processedOn', String(Date.now() - 3_600_000))
        .exec();
      expect(await reconciler.reconcileOnce()).toMatchObject({ reenqueued: 1, awaitingLocks: 0 });
      expect(await (await queue.getJob(`${task.id}-attempt2`))?.getState()).toBe('waiting');
      await queue.resume(true);
      try {
        await waitForBatchDone(api, id);
      } finally {
        await queue.pause(true);
      }
      expect((await taskRows(api, id))[0]).toMatchObject({ status: 'succeeded', attempts: 2 });
    });

    it("a task whose job Bull's stalled recovery handed again is left to that job, not given another", async () => {
      const a = await api.account({ credits: 100 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['redelivered'] });
      const queue = queueOf(gen);
      const [task] = await taskRows(api, id);
      // Its first job (id = the task's) was claimed (attempt 1), its worker killed, and the job
      // handed again by the stalled check: the second claim made attempts 2 under the same job
      // id. That run is alive (here: its job is still to be delivered), only slow to touch the row.
      expect(await (await queue.getJob(task.id))?.getState()).toBe('waiting');
      await api.db.query(`UPDATE tasks SET status = 'running', attempts = 2, updated_at = now() - interval '1 hour' WHERE id = $1`, [
        task.id,
      ]);
      const reconciler = gen.get(TaskReconcilerService);
      expect((await reconciler.reconcileOnce()).reenqueued).toBe(0);
      expect(await queue.getJob(`${task.id}-attempt3`)).toBeNull();
      await queue.resume(true);
      try {
        await waitForBatchDone(api, id);
      } finally {
        await queue.pause(true);
      }
      expect((await taskRows(api, id))[0]).toMatchObject({ status: 'succeeded', attempts: 3 });
    });

    it('the reconciler walks a backlog larger than one pass, page by page', async () => {
      const a = await api.account({ credits: 500 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['b1', 'b2', 'b3', 'b4', 'b5'] });
      const tasks = await taskRows(api, id);
      // One dispatch gives every task of the batch the very same updated_at.
      expect(new Set(tasks.map((t) => t.updated_at.toISOString())).size).toBe(1);
      const queue = queueOf(gen);
      for (const t of tasks) await (await queue.getJob(t.id))?.remove();
      const reconciler = gen.get(TaskReconcilerService);
      reconciler.queuedGraceMs = 0;
      reconciler.passLimit = 2;
      try {
        const found: number[] = [];
        for (let pass = 0; pass < 4; pass++) found.push((await reconciler.reconcileOnce()).reenqueued);
        expect(found).toEqual([2, 2, 1, 0]);
      } finally {
        reconciler.queuedGraceMs = 5000;
        reconciler.passLimit = 500;
      }
      for (const t of tasks) expect(await (await queue.getJob(t.id))?.getState()).toBe('waiting');
      await queue.resume(true);
      try {
        await waitForBatchDone(api, id);
      } finally {
        await queue.pause(true);
      }
    });

    it('a job re-added for a finished task is consumed without effect', async () => {
      const a = await api.account({ credits: 100 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['finished once'] });
      const [task] = await taskRows(api, id);
      expect(await runner.run(task.id)).toBe('succeeded');
      const before = await taskRows(api, id);
      const queue = queueOf(gen);
      await queue.resume(true);
      try {
        // The dispatch's own job is consumed first (a no-op); then a fresh one with the same id.
        await waitFor('the original job to be consumed', async () => (await queue.getJob(task.id)) === null);
        await queue.add('render', { taskId: task.id }, { jobId: task.id });
        await waitFor('the re-added job to be consumed', async () => (await queue.getJob(task.id)) === null);
      } finally {
        await queue.pause(true);
      }
      expect(await taskRows(api, id)).toEqual(before);
      expect(before[0]).toMatchObject({ status: 'succeeded', attempts: 1 });
    });

    // Last of this file's deliveries by hand: a sweep dated 31 days ahead clears what the
    // tests above left behind too.
    it('the retention sweep removes results, previews and uploads past RETENTION_DAYS, and nothing newer', async () => {
      const retention = gen.get(RetentionService);
      const storage = gen.get(StorageDriver);
      const a = await api.account({ credits: 100 });
      const refUrl = await upload(api, a, await solidPng(32, 32, GREEN), 'kept-for-now.png');
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['kept for now'], countPerCombo: 2 });
      for (const task of await taskRows(api, id)) expect(await runner.run(task.id)).toBe('succeeded');
      const done = await taskRows(api, id);
      const keys = done.map((t) => t.result_key as string);
      const previewUrl = (await batchRow(api, id)).preview_url as string;
      const previewKey = storage.keyFromPublicUrl(previewUrl)!;
      const [ref] = await api.db.query(`SELECT storage_key FROM uploads WHERE url = $1`, [refUrl]);

      // Within the retention period: nothing of it goes.
      await retention.sweep(new Date());
      for (const key of [...keys, previewKey, ref.storage_key]) expect(await storage.exists(key)).toBe(true);

      const later = new Date(Date.now() + (config.storage.retentionDays + 1) * 24 * 60 * 60 * 1000);
      const report = await retention.sweep(later);
      expect(report.results).toBeGreaterThanOrEqual(2);
      expect(report.previews).toBeGreaterThanOrEqual(1);
      expect(report.uploads).toBeGreaterThanOrEqual(1);
      for (const key of [...keys, previewKey, ref.storage_key]) expect(await storage.exists(key)).toBe(false);
      const swept = await taskRows(api, id);
      // The rows stay (history, money); the results' URLs now answer 404.
      expect(swept.every((t) => t.status === 'succeeded' && t.result_key === null && t.result_url !== null)).toBe(true);
      expect((await download(api, swept[0].result_url)).status).toBe(404);
      expect((await batchRow(api, id)).preview_url).toBeNull();
      expect(await api.db.query(`SELECT id FROM uploads WHERE url = $1`, [refUrl])).toHaveLength(0);
      // A second sweep finds nothing left.
      expect(await retention.sweep(later)).toEqual({ uploads: 0, results: 0, previews: 0 });
    });
  });
});

describe('generator: fairness between accounts', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;

  beforeAll(async () => {
    // A short queue, so the test can tell "behind the queue" from "behind the whole batch".
    env = await fileEnvironment('gen_fair', {
      generator: { concurrency: 2, reconcileIntervalMs: 60_000 },
      queue: { dispatchWindow: 2, depth: 2, feedIntervalMs: 50 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await env?.teardown();
  });

  it("a 1-image batch created after another account's 100-image batch finishes long before it", async () => {
    const big = await api.account({ plan: 'scale', credits: 1000 });
    const small = await api.account({ credits: 100 });
    const restore = await routeModel(api, 'gamma-5-flash', { type: 'simulated', latencyMs: 40 });
    let bigId: string;
    let smallId: string;
    try {
      bigId = await createBatch(api, big, {
        model: 'gamma-5-flash',
        prompts: Array.from({ length: 25 }, (_, i) => `big ${i}`),
        countPerCombo: 4,
      });
      smallId = await createBatch(api, small, { model: 'gamma-5-flash', prompts: ['small'] });
    } finally {
      await restore();
    }
    await waitForBatchDone(api, smallId);
    const bigAtThatMoment = await batchRow(api, bigId);
    expect(bigAtThatMoment.finished_at).toBeNull();
    expect(bigAtThatMoment.succeeded_count).toBeLessThan(10);
    // Redis holds a short queue (depth 2, plus windows of new batches), PostgreSQL the backlog.
    const queue = queueOf(gen);
    for (let i = 0; i < 5; i++) {
      expect(await queue.getWaitingCount()).toBeLessThanOrEqual(4);
      await new Promise((r) => setTimeout(r, 60));
    }
    const [{ pending }] = await api.db.query(`SELECT count(*)::int AS pending FROM tasks WHERE batch_id = $1 AND status = 'pending'`, [
      bigId,
    ]);
    expect(pending).toBeGreaterThan(50);
    await waitForBatchDone(api, bigId);
    const [s, b] = [await batchRow(api, smallId), await batchRow(api, bigId)];
    expect(s.finished_at.getTime()).toBeLessThan(b.finished_at.getTime());
    expect(b).toMatchObject({ total: 100, succeeded_count: 100, status: 'succeeded' });
  });
});
