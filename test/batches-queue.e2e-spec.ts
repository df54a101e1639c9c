import { getQueueToken } from '@nestjs/bull';
import Bull, { Queue } from 'bull';
import { PostgresQueryRunner } from 'typeorm/driver/postgres/PostgresQueryRunner';
import { TASK_QUEUE, TaskDispatchService } from '@app/batches';
import { TestApp } from '@app/testing';
import { bootBatchesApp, getJson, postBatch, taskRows } from './batches-support';

/** Handing tasks to the generator: Bull jobs, fairness, Redis outages and the reconciler. */
describe('Batches: dispatch to the task queue', () => {
  let t: TestApp;
  let queue: Queue;
  let dispatch: TaskDispatchService;
  beforeAll(async () => {
    t = await bootBatchesApp();
    queue = t.app.get(getQueueToken(TASK_QUEUE));
    dispatch = t.app.get(TaskDispatchService);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    dispatch.enqueueTimeoutMs = 2000;
  });
  afterAll(() => t.close());

  /** Makes a batch's pending tasks look long forgotten, so only they match a far-back reconcile. */
  const TWENTY_YEARS_MS = 20 * 365 * 24 * 3600 * 1000;
  async function ageTasks(batchId: string): Promise<void> {
    await t.db.query(`UPDATE tasks SET updated_at = '2000-01-01T00:00:00Z' WHERE batch_id = $1`, [batchId]);
  }

  it('moves tasks to queued with one render job per task: jobId = task id, attempts 1, priority = position + 1', async () => {
    const a = await t.account();
    const res = await postBatch(t, a, { prompts: ['a', 'b'], model: 'eta-image', countPerCombo: 2 }).expect(201);
    const tasks = await taskRows(t, res.body.id);
    expect(tasks.map((x) => x.status)).toEqual(['queued', 'queued', 'queued', 'queued']);
    for (const task of tasks) {
      const job = await queue.getJob(task.id);
      expect(job).not.toBeNull();
      expect(job!.name).toBe('render');
      expect(job!.data).toEqual({ taskId: task.id });
      expect(job!.opts).toMatchObject({ jobId: task.id, attempts: 1, priority: task.seq + 1 });
      expect(await job!.getState()).toBe('waiting');
    }
  });

  it('fairness: a 1-image batch created behind a 100-image batch is served second, not 101st', async () => {
    const big = await t.account({ plan: 'scale' });
    const small = await t.account();
    const bigBatch = await postBatch(t, big, { prompts: Array.from({ length: 100 }, (_, i) => `big ${i}`), model: 'eta-image' }).expect(201);
    const smallBatch = await postBatch(t, small, { prompts: ['small'], model: 'eta-image' }).expect(201);
    const ids = new Map<string, string>();
    for (const x of await taskRows(t, bigBatch.body.id)) ids.set(x.id, `big:${x.seq}`);
    for (const x of await taskRows(t, smallBatch.body.id)) ids.set(x.id, `small:${x.seq}`);
    // getWaiting lists jobs in the order workers will take them.
    const waiting = await queue.getWaiting(0, -1);
    const served = waiting.map((j) => ids.get(String(j.id))).filter((x): x is string => x !== undefined);
    expect(served).toHaveLength(101);
    expect(served.slice(0, 3)).toEqual(['big:0', 'small:0', 'big:1']);
  });

  it('Redis refusing: the POST still answers 201 with money and tasks committed; the reconciler enqueues them once', async () => {
    const a = await t.account({ credits: 100 });
    jest.spyOn(queue, 'addBulk').mockRejectedValueOnce(new Error('connect ECONNREFUSED 127.0.0.1:6379'));
    const res = await postBatch(t, a, { prompts: ['a', 'b', 'c'], model: 'beta-2' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ total: 3, creditsCharged: 12, status: 'pending' });
    expect(await t.balance(a.id)).toBe(88);
    const tasks = await taskRows(t, res.body.id);
    expect(tasks.map((x) => x.status)).toEqual(['pending', 'pending', 'pending']);
    for (const task of tasks) expect(await queue.getJob(task.id)).toBeNull();
    const detail = await getJson(t, a, `/v1/batches/${res.body.id}`).expect(200);
    expect(detail.body.batch).toMatchObject({ counts: { pending: 3, running: 0, succeeded: 0, failed: 0 }, done: false });

    await ageTasks(res.body.id);
    const addBulk = jest.spyOn(queue, 'addBulk');
    addBulk.mockClear();
    expect(await dispatch.reconcilePending(TWENTY_YEARS_MS)).toBe(3);
    expect((await taskRows(t, res.body.id)).map((x) => x.status)).toEqual(['queued', 'queued', 'queued']);
    for (const task of tasks) {
      const job = await queue.getJob(task.id);
      expect(job?.opts).toMatchObject({ jobId: task.id, priority: task.seq + 1 });
    }
    // A second pass finds nothing pending, and re-adding a live job is a no-op in Bull.
    expect(await dispatch.reconcilePending(TWENTY_YEARS_MS)).toBe(0);
    expect(await dispatch.dispatch(tasks)).toBe(0);
    expect(addBulk).toHaveBeenCalledTimes(2);
    const mine = (await queue.getWaiting(0, -1)).filter((j) => tasks.some((x) => x.id === String(j.id)));
    expect(mine).toHaveLength(3);
  });

  it('Redis hanging: the POST answers within the enqueue timeout and leaves the tasks pending', async () => {
    const a = await t.account();
    dispatch.enqueueTimeoutMs = 300;
    jest.spyOn(queue, 'addBulk').mockReturnValueOnce(new Promise(() => undefined));
    const started = Date.now();
    const res = await postBatch(t, a, { prompts: ['a'], model: 'eta-image' });
    const elapsed = Date.now() - started;
    expect(res.status).toBe(201);
    expect(elapsed).toBeLessThan(1500);
    expect((await taskRows(t, res.body.id)).map((x) => x.status)).toEqual(['pending']);
  });

  it('a queue whose Redis is unreachable: dispatch gives up after the timeout and changes nothing', async () => {
    const a = await t.account();
    jest.spyOn(queue, 'addBulk').mockRejectedValueOnce(new Error('down'));
    const res = await postBatch(t, a, { prompts: ['a'], model: 'eta-image' }).expect(201);
    const tasks = await taskRows(t, res.body.id);

    const deadQueue = new Bull(TASK_QUEUE, 'redis://127.0.0.1:1', {
      redis: { maxRetriesPerRequest: null, enableReadyCheck: false, retryStrategy: () => 200 },
    });
    deadQueue.on('error', () => undefined);
    try {
      const offline = new TaskDispatchService(deadQueue, t.db);
      offline.enqueueTimeoutMs = 300;
      const started = Date.now();
      expect(await offline.dispatch(tasks)).toBe(0);
      expect(Date.now() - started).toBeLessThan(1500);
      expect((await taskRows(t, res.body.id)).map((x) => x.status)).toEqual(['pending']);
    } finally {
      await Promise.race([deadQueue.close(true).catch(() => undefined), new Promise((r) => setTimeout(r, 500))]);
      // Bull's typings only declare `client`; the blocking and event connections exist too.
      const clients = deadQueue as unknown as Record<'client' | 'eclient' | 'bclient', { disconnect(): void } | undefined>;
      for (const c of [clients.client, clients.eclient, clients.bclient]) c?.disconnect();
    }
    // The healthy queue picks it up afterwards.
    await ageTasks(res.body.id);
    expect(await dispatch.reconcilePending(TWENTY_YEARS_MS)).toBe(1);
    expect(await queue.getJob(tasks[0].id)).not.toBeNull();
  });

  it('the reconciler leaves recent pending tasks alone (their request may still be dispatching them)', async () => {
    const a = await t.account();
    jest.spyOn(queue, 'addBulk').mockRejectedValueOnce(new Error('down'));
    const res = await postBatch(t, a, { prompts: ['a'], model: 'eta-image' }).expect(201);
    const addBulk = jest.spyOn(queue, 'addBulk');
    addBulk.mockClear();
    await dispatch.reconcilePending(TWENTY_YEARS_MS);
    expect((await taskRows(t, res.body.id)).map((x) => x.status)).toEqual(['pending']);
    const forgotten = addBulk.mock.calls.flatMap((c) => c[0].map((j) => j.opts?.jobId));
    expect(forgotten).not.toContain((await taskRows(t, res.body.id))[0].id);
  });

  it('a 100-image batch is written with a constant number of queries and answers 201 at once; polling takes two', async () => {
    const a = await t.account({ plan: 'scale', credits: 10_000 });
    await getJson(t, a, '/v1/me').expect(200); // first use of a key writes lastUsedAt once
    const spy = jest.spyOn(PostgresQueryRunner.prototype, 'query');
    const sqlOf = () => spy.mock.calls.map((c) => String(c[0]).replace(/\s+/g, ' ').trim());

    await postBatch(t, a, { prompts: ['one'], model: 'eta-image' }).expect(201);
    const one = sqlOf();
    spy.mockClear();

    const prompts = Array.from({ length: 25 }, (_, i) => `prompt ${i}`);
    const started = process.hrtime.bigint();
    const res = await postBatch(t, a, { prompts, model: 'eta-image', countPerCombo: 4 });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const hundred = sqlOf();
    expect(res.status).toBe(201);
    expect(res.body.total).toBe(100);

    expect(hundred.length).toBe(one.length);
    expect(hundred.length).toBeLessThanOrEqual(16);
    expect(hundred.filter((q) => /^INSERT INTO tasks/i.test(q))).toHaveLength(1);
    expect(hundred.filter((q) => /^INSERT INTO batches/i.test(q))).toHaveLength(1);
    const tasks = await taskRows(t, res.body.id);
    expect(tasks).toHaveLength(100);
    expect(tasks.every((x) => x.status === 'queued')).toBe(true);
    expect(tasks.map((x) => x.prompt).slice(0, 5)).toEqual(['prompt 0', 'prompt 0', 'prompt 0', 'prompt 0', 'prompt 1']);

    // Polling and listing: two queries each (batch + tasks; page + one aggregate of counts).
    const touchesBatches = (q: string) => /\b(batches|tasks)\b/i.test(q);
    spy.mockClear();
    const detail = await getJson(t, a, `/v1/batches/${res.body.id}`).expect(200);
    expect(detail.body.tasks).toHaveLength(100);
    expect(sqlOf().filter(touchesBatches)).toHaveLength(2);
    spy.mockClear();
    await getJson(t, a, '/v1/batches?limit=100').expect(200);
    expect(sqlOf().filter(touchesBatches)).toHaveLength(2);

    // Timing, for the record (the assertion is loose so a slow CI machine does not flake).
    const times: number[] = [ms];
    for (let i = 0; i < 4; i++) {
      const s = process.hrtime.bigint();
      await postBatch(t, a, { prompts, model: 'eta-image', countPerCombo: 4 }).expect(201);
      times.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    process.stdout.write(
      `100-image POST /v1/batches: ${times.map((x) => x.toFixed(1)).join(', ')} ms; ${hundred.length} SQL statements\n`,
    );
    expect(Math.min(...times)).toBeLessThan(1000);
  });
});
