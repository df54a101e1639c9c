import { getQueueToken } from '@nestjs/bull';
import Bull, { Queue } from 'bull';
import { BatchChangePublisher, TASK_QUEUE, TaskDispatchService } from '@app/tasks';
import { TestApp, getJson, postBatch, recordSql, taskRows, FileEnvironment, fileEnvironment } from '@app/testing';
import { bootBatchesApp } from './helpers/apps';

/**
 * A creation's SQL, whatever its size: the key (its models allowlist with it), the model, then
 * the transaction (begin, the account and key locks, the open-batch count, the debit with its
 * ledger row, the batch with its tasks, commit). Each is a round trip, most of them under the
 * account's lock.
 */
const CREATION_STATEMENTS = 8;

/**
 * Handing tasks to the generator: a new batch's window of Bull jobs, the fair feed of the
 * rest, Redis outages. On a database of its own: `feed` takes the whole database's pending
 * tasks, which on the shared one belong to other files too.
 */
describe('Batches: dispatch to the task queue', () => {
  let env: FileEnvironment;
  let t: TestApp;
  let queue: Queue;
  let dispatch: TaskDispatchService;
  beforeAll(async () => {
    // A queue depth no larger than the window: each batch gets exactly its window, whatever
    // the queue holds (the queue's room is the subject of one test, which raises it).
    const base = await fileEnvironment('batches_queue');
    env = { ...base, config: { ...base.config, queue: { ...base.config.queue, dispatchWindow: 10, depth: 10 } } };
    t = await bootBatchesApp(env.config);
    queue = t.app.get(getQueueToken(TASK_QUEUE));
    dispatch = t.app.get(TaskDispatchService);
  });
  afterEach(() => {
    jest.restoreAllMocks();
    dispatch.enqueueTimeoutMs = 2000;
  });
  afterAll(async () => {
    await t?.close();
    await env?.teardown();
  });

  /** Feeds until nothing is pending; returns how many tasks were fed. */
  async function feedAll(): Promise<number> {
    let total = 0;
    for (let n = await dispatch.feed(1000); n > 0; n = await dispatch.feed(1000)) total += n;
    return total;
  }

  it('a new batch: its first DISPATCH_WINDOW tasks are queued with a render job each (jobId = task id, attempts 1, no priority, the batch and seq as hints), the rest wait pending', async () => {
    const a = await t.account();
    const res = await postBatch(t, a, { prompts: ['a', 'b', 'c'], model: 'eta-image', countPerCombo: 4 }).expect(201);
    const tasks = await taskRows(t, res.body.id);
    expect(tasks.map((x) => x.status)).toEqual([...Array(10).fill('queued'), 'pending', 'pending']);
    for (const task of tasks) {
      const job = await queue.getJob(task.id);
      if (task.seq >= 10) {
        expect(job).toBeNull();
        continue;
      }
      expect(job!.name).toBe('render');
      // The batch and seq ride along as hints: the worker takes its slot by them before claiming.
      expect(job!.data).toEqual({ taskId: task.id, batchId: res.body.id, seq: task.seq });
      expect(job!.opts).toMatchObject({ jobId: task.id, attempts: 1 });
      expect(job!.opts.priority).toBeUndefined();
      expect(await job!.getState()).toBe('waiting');
    }
    // The pending counts as pending in the API, as queued does (docs/api.md#counts-object).
    const detail = await getJson(t, a, `/v1/batches/${res.body.id}`).expect(200);
    expect(detail.body.batch.counts).toEqual({ pending: 12, running: 0, succeeded: 0, failed: 0, cancelled: 0, cancelling: 0 });
    expect(await feedAll()).toBe(2);
    expect((await taskRows(t, res.body.id)).every((x) => x.status === 'queued')).toBe(true);
  });

  it('a queue with room takes a new batch whole at once (up to its depth); a full one, only the window', async () => {
    const queueConfig = env.config.queue;
    const a = await t.account({ plan: 'scale' });
    const prompts = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p} ${i}`);
    await queue.empty();
    queueConfig.depth = 40;
    try {
      const first = await postBatch(t, a, { prompts: prompts('first', 25), model: 'eta-image' }).expect(201);
      const second = await postBatch(t, a, { prompts: prompts('second', 25), model: 'eta-image' }).expect(201);
      const third = await postBatch(t, a, { prompts: prompts('third', 25), model: 'eta-image' }).expect(201);
      const queuedOf = async (id: string) => (await taskRows(t, id)).filter((x) => x.status === 'queued').map((x) => x.seq);
      const upTo = (n: number) => Array.from({ length: n }, (_, i) => i);
      // Empty queue: all 25. Then 15 of room left: 15 (more than the window). Then none: the window.
      expect(await queuedOf(first.body.id)).toEqual(upTo(25));
      expect(await queuedOf(second.body.id)).toEqual(upTo(15));
      expect(await queuedOf(third.body.id)).toEqual(upTo(10));
      expect(await queue.getWaitingCount()).toBe(50);

      // Redis not answering the length in time: the window, and the POST is not held up.
      jest.spyOn(queue, 'getWaitingCount').mockReturnValueOnce(new Promise(() => undefined));
      await queue.empty();
      const slow = await postBatch(t, a, { prompts: prompts('slow', 25), model: 'eta-image' }).expect(201);
      expect(await queuedOf(slow.body.id)).toEqual(upTo(10));
    } finally {
      queueConfig.depth = 10;
      await feedAll();
      await queue.empty();
    }
  });

  it("creations that arrive together share one question about the queue's room; the next one asks again", async () => {
    const queueConfig = env.config.queue;
    queueConfig.depth = 40;
    try {
      await queue.empty();
      const asked = jest.spyOn(queue, 'getWaitingCount');
      // Three at once: one MULTI to Redis, one answer (the queue is empty: room for 40).
      expect(await Promise.all([dispatch.dispatchCount(25), dispatch.dispatchCount(25), dispatch.dispatchCount(50)])).toEqual([25, 25, 40]);
      expect(asked).toHaveBeenCalledTimes(1);
      // Once answered, a later creation asks afresh and sees what was added since.
      await queue.addBulk(Array.from({ length: 35 }, (_, i) => ({ name: 'render', data: {}, opts: { jobId: `room-${i}` } })));
      expect(await dispatch.dispatchCount(25)).toBe(10);
      expect(asked).toHaveBeenCalledTimes(2);
      // A failed question is not kept either: the window, then a fresh question.
      asked.mockRejectedValueOnce(new Error('redis down'));
      expect(await dispatch.dispatchCount(25)).toBe(10);
      await queue.empty();
      expect(await dispatch.dispatchCount(25)).toBe(25);
      expect(asked).toHaveBeenCalledTimes(4);
    } finally {
      queueConfig.depth = 10;
      await queue.empty();
    }
  });

  it('fairness: a 1-image batch behind two 100-image batches is served 11th, and the feed interleaves the big ones', async () => {
    const big = await t.account({ plan: 'scale' });
    const other = await t.account({ plan: 'scale' });
    const small = await t.account();
    const prompts = (p: string) => Array.from({ length: 100 }, (_, i) => `${p} ${i}`);
    const bigBatch = await postBatch(t, big, { prompts: prompts('big'), model: 'eta-image' }).expect(201);
    const smallBatch = await postBatch(t, small, { prompts: ['small'], model: 'eta-image' }).expect(201);
    const otherBatch = await postBatch(t, other, { prompts: prompts('other'), model: 'eta-image' }).expect(201);
    const ids = new Map<string, string>();
    for (const [name, id] of [
      ['big', bigBatch.body.id],
      ['small', smallBatch.body.id],
      ['other', otherBatch.body.id],
    ]) {
      for (const x of await taskRows(t, id)) ids.set(x.id, `${name}:${x.seq}`);
    }
    expect(await feedAll()).toBe(180);
    // getWaiting lists jobs in the order workers will take them.
    const served = (await queue.getWaiting(0, -1)).map((j) => ids.get(String(j.id))).filter((x): x is string => x !== undefined);
    expect(served).toHaveLength(201);
    expect(served.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => `big:${i}`));
    expect(served[10]).toBe('small:0');
    expect(served.slice(11, 21)).toEqual(Array.from({ length: 10 }, (_, i) => `other:${i}`));
    // The backlog, fed: each batch's n-th task before any batch's (n+1)-th, older first.
    expect(served.slice(21, 25)).toEqual(['big:10', 'other:10', 'big:11', 'other:11']);
    expect(served.slice(-2)).toEqual(['big:99', 'other:99']);
  });

  it('two feeders at once never take the same task, and each takes at most what it was asked', async () => {
    const a = await t.account({ plan: 'scale' });
    const res = await postBatch(t, a, { prompts: Array.from({ length: 50 }, (_, i) => `p ${i}`), model: 'eta-image' }).expect(201);
    const addBulk = jest.spyOn(queue, 'addBulk');
    const fed = await Promise.all([dispatch.feed(25), dispatch.feed(25), dispatch.feed(25)]);
    expect(fed.every((n) => n <= 25)).toBe(true);
    expect(fed.reduce((x, y) => x + y, 0)).toBe(40);
    const added = addBulk.mock.calls.flatMap((c) => c[0].map((j) => String(j.opts?.jobId)));
    expect(new Set(added).size).toBe(40);
    expect((await taskRows(t, res.body.id)).every((x) => x.status === 'queued')).toBe(true);
    expect(await dispatch.feed(25)).toBe(0);
  });

  it('Redis refusing: the POST still answers 201 with money and tasks committed; the feeder enqueues them once', async () => {
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

    expect(await feedAll()).toBe(3);
    expect((await taskRows(t, res.body.id)).map((x) => x.status)).toEqual(['queued', 'queued', 'queued']);
    for (const task of tasks) {
      const job = await queue.getJob(task.id);
      expect(job?.opts).toMatchObject({ jobId: task.id });
      // The feeder's jobs carry the hints too.
      expect(job?.data).toEqual({ taskId: task.id, batchId: res.body.id, seq: task.seq });
    }
    // Nothing is pending any more, and re-adding a live job is a no-op in Bull.
    expect(await dispatch.feed(100)).toBe(0);
    expect(await dispatch.enqueueQueued(tasks.map((x) => ({ id: x.id })))).toBe(3);
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
    await feedAll();
  });

  it('a queue whose Redis is unreachable: enqueueing gives up after the timeout and puts the tasks back to pending', async () => {
    const a = await t.account();
    const res = await postBatch(t, a, { prompts: ['a'], model: 'eta-image' }).expect(201);
    const tasks = await taskRows(t, res.body.id);
    await queue.removeJobs(tasks[0].id);
    expect(tasks[0].status).toBe('queued');

    const deadQueue = new Bull(TASK_QUEUE, 'redis://127.0.0.1:1', {
      redis: { maxRetriesPerRequest: null, enableReadyCheck: false, retryStrategy: () => 200 },
    });
    deadQueue.on('error', () => undefined);
    try {
      const offline = new TaskDispatchService(deadQueue, t.db, env.config, t.app.get(BatchChangePublisher));
      offline.enqueueTimeoutMs = 300;
      const started = Date.now();
      expect(await offline.enqueueQueued(tasks.map((x) => ({ id: x.id })))).toBe(0);
      expect(Date.now() - started).toBeLessThan(1500);
      expect((await taskRows(t, res.body.id)).map((x) => x.status)).toEqual(['pending']);
    } finally {
      await Promise.race([deadQueue.close(true).catch(() => undefined), new Promise((r) => setTimeout(r, 500))]);
      // Bull's typings only declare `client`; the blocking and event connections exist too.
      const clients = deadQueue as unknown as Record<'client' | 'eclient' | 'bclient', { disconnect(): void } | undefined>;
      for (const c of [clients.client, clients.eclient, clients.bclient]) c?.disconnect();
    }
    // The healthy queue's feeder picks it up afterwards.
    expect(await feedAll()).toBe(1);
    expect(await queue.getJob(tasks[0].id)).not.toBeNull();
  });

  it('a 100-image batch is written with a constant number of queries and answers 201 at once; polling takes two', async () => {
    const a = await t.account({ plan: 'scale', credits: 10_000 });
    await getJson(t, a, '/v1/me').expect(200); // first use of a key writes lastUsedAt once
    const recorder = recordSql();
    // The content policy's terms are read through a cache of a few seconds: its refresh lands
    // in whichever create comes first after it expires, whatever the batch's size.
    const sqlOf = () => recorder.statements().filter((q) => !/^SELECT term FROM content_policy_terms/.test(q));

    await postBatch(t, a, { prompts: ['one'], model: 'eta-image' }).expect(201);
    const one = sqlOf();
    recorder.clear();

    const prompts = Array.from({ length: 25 }, (_, i) => `prompt ${i}`);
    const started = process.hrtime.bigint();
    const res = await postBatch(t, a, { prompts, model: 'eta-image', countPerCombo: 4 });
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const hundred = sqlOf();
    expect(res.status).toBe(201);
    expect(res.body.total).toBe(100);

    expect(hundred.length).toBe(one.length);
    expect(hundred.length).toBeLessThanOrEqual(CREATION_STATEMENTS);
    // The batch and all its tasks in one statement; the debit and its ledger row in another.
    const writes = hundred.filter((q) => /INSERT INTO (tasks|batches|ledger_entries)\b/i.test(q));
    expect(writes).toHaveLength(2);
    expect(writes.filter((q) => /INSERT INTO batches\b/i.test(q) && /INSERT INTO tasks\b/i.test(q))).toHaveLength(1);
    expect(writes.filter((q) => /UPDATE accounts SET balance/i.test(q) && /INSERT INTO ledger_entries\b/i.test(q))).toHaveLength(1);
    const tasks = await taskRows(t, res.body.id);
    expect(tasks).toHaveLength(100);
    expect(tasks.filter((x) => x.status === 'queued').map((x) => x.seq)).toEqual(Array.from({ length: 10 }, (_, i) => i));
    expect(tasks.filter((x) => x.status === 'pending')).toHaveLength(90);
    expect(tasks.map((x) => x.prompt).slice(0, 5)).toEqual(['prompt 0', 'prompt 0', 'prompt 0', 'prompt 0', 'prompt 1']);

    // Polling and listing: two queries each (batch + tasks; page + one aggregate of counts).
    const touchesBatches = (q: string) => /\b(batches|tasks)\b/i.test(q);
    recorder.clear();
    const detail = await getJson(t, a, `/v1/batches/${res.body.id}`).expect(200);
    expect(detail.body.tasks).toHaveLength(100);
    expect(sqlOf().filter(touchesBatches)).toHaveLength(2);
    recorder.clear();
    await getJson(t, a, '/v1/batches?limit=100').expect(200);
    expect(sqlOf().filter(touchesBatches)).toHaveLength(2);
    recorder.restore();

    // Timing, for the record (the assertion is loose so a slow CI machine does not flake).
    const times: number[] = [ms];
    for (let i = 0; i < 4; i++) {
      const s = process.hrtime.bigint();
      await postBatch(t, a, { prompts, model: 'eta-image', countPerCombo: 4 }).expect(201);
      times.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    process.stdout.write(`100-image POST /v1/batches: ${times.map((x) => x.toFixed(1)).join(', ')} ms; ${hundred.length} SQL statements\n`);
    expect(Math.min(...times)).toBeLessThan(1000);
  });
});
