import { DataSource } from 'typeorm';
import { KilnConfig } from '@app/config';
import { BatchPolling, BatchWatcher, MAX_HELD_PER_HOLDER } from '@app/batches';
import { TaskStateStore } from '@app/tasks';
import { bearer, createBatch, fileEnvironment, FileEnvironment, recordSql, taskRows, TestAccount, TestApp, waitFor } from '@app/testing';
import { bootApi } from './helpers/apps';

jest.setTimeout(90_000);

/**
 * Conditional and long polling of GET /v1/batches/{id}, with no generator: the api's own
 * TaskStateStore plays the generator's writes (the same statements, the same announcements).
 */
describe('polling a batch: ETag, If-None-Match and Prefer: wait', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let store: TaskStateStore;

  beforeAll(async () => {
    env = await fileEnvironment('polling');
    config = env.config;
    api = await bootApi(config);
    store = api.app.get(TaskStateStore);
  });
  afterAll(async () => {
    await api?.close();
    await env?.teardown();
  });

  const poll = (a: TestAccount, id: string, headers: Record<string, string> = {}) => {
    const req = api.http.get(`/v1/batches/${id}`).set('Authorization', bearer(a));
    for (const [k, v] of Object.entries(headers)) req.set(k, v);
    return req;
  };
  /** One task of the batch claimed and sent, as a generator would; returns its success. */
  async function startOne(batchId: string, seq = 0): Promise<() => Promise<unknown>> {
    const task = (await taskRows(api, batchId))[seq];
    const claim = (await store.claim(task.id))!;
    const fence = { taskId: claim.id, attempt: claim.attempts, batchId };
    expect(await store.send(fence)).toBe(true);
    return () =>
      store.succeed({
        fence,
        batchId,
        resultUrl: `http://kiln.test/files/r/${task.id}.png`,
        resultKey: `r/${task.id}.png`,
        previewUrl: null,
        width: 64,
        height: 64,
      });
  }
  const finishOne = async (batchId: string, seq = 0) => (await startOne(batchId, seq))();

  it('every 200 carries a weak ETag; If-None-Match with it answers 304 with no body, from one batches row read', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['etag'], countPerCombo: 2 });
    const first = await poll(a, id).expect(200);
    const etag = first.headers.etag;
    expect(etag).toMatch(/^W\/".+"$/);

    const recorder = recordSql();
    let res;
    let sql: string[];
    try {
      res = await poll(a, id, { 'If-None-Match': etag });
      sql = recorder.statements().filter((q) => !/api_keys/.test(q));
    } finally {
      recorder.restore();
    }
    expect(res.status).toBe(304);
    expect(res.text ?? '').toBe('');
    expect(res.headers.etag).toBe(etag);
    // Besides the key's authentication: one statement, on batches only.
    expect(sql).toHaveLength(1);
    expect(sql[0]).toMatch(/FROM batches WHERE id = \$1 AND account_id = \$2/);
    expect(sql.some((q) => /\btasks\b/.test(q))).toBe(false);

    // A list of tags, one of them current, or *, also match; another tag does not.
    expect((await poll(a, id, { 'If-None-Match': `W/"x-1", ${etag}` })).status).toBe(304);
    expect((await poll(a, id, { 'If-None-Match': '*' })).status).toBe(304);
    expect((await poll(a, id, { 'If-None-Match': 'W/"other-0"' })).status).toBe(200);
  });

  it('the ETag changes with every task write (claim, send, progress, success) and with a cancel', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['moves'], countPerCombo: 3 });
    const tags = [(await poll(a, id).expect(200)).headers.etag];
    const next = async () => {
      const res = await poll(a, id, { 'If-None-Match': tags[tags.length - 1] }).expect(200);
      tags.push(res.headers.etag);
      return res.body;
    };
    const [task] = await taskRows(api, id);
    const claim = (await store.claim(task.id))!;
    expect((await next()).tasks[0].status).toBe('queued');
    const fence = { taskId: claim.id, attempt: claim.attempts, batchId: id };
    await store.send(fence);
    expect((await next()).tasks[0]).toMatchObject({ status: 'running', progress: 1 });
    await store.reportProgress(fence, 50);
    expect((await next()).tasks[0]).toMatchObject({ progress: 50 });
    await store.succeed({
      fence,
      batchId: id,
      resultUrl: 'http://kiln.test/files/r/1.png',
      resultKey: 'r/1.png',
      previewUrl: null,
      width: 64,
      height: 64,
    });
    expect((await next()).batch.counts.succeeded).toBe(1);
    await api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a)).expect(200);
    expect((await next()).batch.status).toBe('cancelled');
    expect(new Set(tags).size).toBe(tags.length);
  });

  it("Express's own ETag is off: other GETs carry none", async () => {
    const a = await api.account();
    const res = await api.http.get('/v1/me').set('Authorization', bearer(a)).expect(200);
    expect(res.headers.etag).toBeUndefined();
  });

  it('Prefer: wait holds the answer until a task finishes, then 200 with the new body and Preference-Applied', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['held'], countPerCombo: 2 });
    const succeed = await startOne(id);
    const etag = (await poll(a, id).expect(200)).headers.etag;
    const started = Date.now();
    const held = poll(a, id, { 'If-None-Match': etag, Prefer: 'wait=30' }).then((r) => r);
    await waitFor('the poll to be held', () => api.app.get(BatchWatcher).watching === 1);
    await new Promise((r) => setTimeout(r, 300));
    await succeed();
    const res = await held;
    const took = Date.now() - started;
    expect(res.status).toBe(200);
    expect(res.headers['preference-applied']).toBe('wait=30');
    expect(res.headers.etag).not.toBe(etag);
    expect(res.body.batch.counts.succeeded).toBe(1);
    // Released by the change, not by the deadline (generous: the machine is loaded).
    expect(took).toBeLessThan(15_000);
  });

  it('a held poll that sees no change answers 304 at its deadline; without If-None-Match, 200 with the current body', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['quiet'] });
    const etag = (await poll(a, id).expect(200)).headers.etag;
    let started = Date.now();
    const res = await poll(a, id, { 'If-None-Match': etag, Prefer: 'wait=1' });
    expect(res.status).toBe(304);
    expect(res.headers['preference-applied']).toBe('wait=1');
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
    expect(Date.now() - started).toBeLessThan(10_000);

    started = Date.now();
    const plain = await poll(a, id, { Prefer: 'wait=1' });
    expect(plain.status).toBe(200);
    expect(plain.headers.etag).toBe(etag);
    expect(Date.now() - started).toBeGreaterThanOrEqual(950);
  });

  it('a done batch, or a stale If-None-Match, answers at once', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['done'] });
    const stale = (await poll(a, id).expect(200)).headers.etag;
    let started = Date.now();
    await finishOne(id);
    const changed = await poll(a, id, { 'If-None-Match': stale, Prefer: 'wait=30' });
    expect(changed.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(10_000);

    started = Date.now();
    const done = await poll(a, id, { 'If-None-Match': changed.headers.etag, Prefer: 'wait=30' });
    expect(done.status).toBe(304);
    expect(done.headers['preference-applied']).toBe('wait=30');
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it(`each key holds at most ${MAX_HELD_PER_HOLDER} polls; past that a poll answers at once`, async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['cap'] });
    const etag = (await poll(a, id).expect(200)).headers.etag;
    const polling = api.app.get(BatchPolling);
    const held = Array.from({ length: MAX_HELD_PER_HOLDER }, () => poll(a, id, { 'If-None-Match': etag, Prefer: 'wait=8' }).then((r) => r));
    await waitFor('20 held polls', () => polling.heldBy(`key:${a.keyId}`) === MAX_HELD_PER_HOLDER, 20_000);
    const started = Date.now();
    const extra = await poll(a, id, { 'If-None-Match': etag, Prefer: 'wait=8' });
    expect(extra.status).toBe(304);
    expect(extra.headers['preference-applied']).toBeUndefined();
    expect(Date.now() - started).toBeLessThan(5000);
    // Another key is not affected by this one's polls.
    const b = await api.account();
    expect(polling.heldBy(`key:${b.keyId}`)).toBe(0);
    await finishOne(id);
    const released = await Promise.all(held);
    expect(released.every((r) => r.status === 200)).toBe(true);
    expect(polling.heldBy(`key:${a.keyId}`)).toBe(0);
  });

  it('a held poll counts once against the rate limit', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['rl'] });
    const before = Number((await poll(a, id).expect(200)).headers['ratelimit-remaining']);
    const held = await poll(a, id, { Prefer: 'wait=1' }).expect(200);
    expect(Number(held.headers['ratelimit-remaining'])).toBe(before - 1);
  });

  it('without Redis announcements a held poll falls back to re-reading the version, and is still released', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['no redis'], countPerCombo: 2 });
    const etag = (await poll(a, id).expect(200)).headers.etag;
    const watch = jest.spyOn(api.app.get(BatchWatcher), 'watch').mockResolvedValue(null);
    try {
      const started = Date.now();
      const held = poll(a, id, { 'If-None-Match': etag, Prefer: 'wait=20' }).then((r) => r);
      await new Promise((r) => setTimeout(r, 500));
      // Written behind the api's back: no announcement at all.
      await api.app.get(DataSource).query(`UPDATE batches SET version = version + 1 WHERE id = $1`, [id]);
      const res = await held;
      expect(res.status).toBe(200);
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      watch.mockRestore();
    }
  });
});
