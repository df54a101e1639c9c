import { BatchEvent, Kiln } from '@app/sdk';
import { BatchEvents, MAX_HELD_PER_HOLDER } from '@app/batches';
import { TaskStateStore } from '@app/tasks';
import { bearer, createBatch, fileEnvironment, FileEnvironment, routeModel, taskRows, TestAccount, TestApp } from '@app/testing';
import { bootApi } from './helpers/apps';
import { freePort, LiveKiln, startLiveKiln } from './helpers/live-kiln';

jest.setTimeout(120_000);

/** Every event of an iterator until it ends (or `stopAfter` of them). */
async function collect(events: AsyncIterable<BatchEvent>, stopAfter = Infinity): Promise<BatchEvent[]> {
  const seen: BatchEvent[] = [];
  for await (const e of events) {
    seen.push(e);
    if (seen.length >= stopAfter) break;
  }
  return seen;
}
const taskIds = (events: BatchEvent[]) => events.flatMap((e) => (e.type === 'task' ? [e.task.id] : []));

/**
 * The progress stream, GET /v1/batches/{id}/events, on an api listening on a port, with no
 * generator: the api's own TaskStateStore plays the generator's writes (the same statements
 * and the same announcements), so each test decides when a task finishes.
 */
describe('GET /v1/batches/{id}/events: the progress stream', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let url: string;
  let store: TaskStateStore;

  async function listen(app: TestApp): Promise<string> {
    const port = await freePort();
    await app.app.listen(port, '127.0.0.1');
    return `http://127.0.0.1:${port}`;
  }

  beforeAll(async () => {
    env = await fileEnvironment('events');
    api = await bootApi(env.config);
    url = await listen(api);
    store = api.app.get(TaskStateStore);
  });
  /** Second api processes, closed last (see the stopping test). */
  const others: TestApp[] = [];
  afterAll(async () => {
    for (const other of others) await other.close();
    await api?.close();
    await env?.teardown();
  });

  const kilnFor = (a: TestAccount, baseUrl = url) => new Kiln({ baseUrl, apiKey: a.key });
  async function finish(batchId: string, seq: number): Promise<void> {
    const task = (await taskRows(api, batchId))[seq];
    const claim = (await store.claim(task.id))!;
    const fence = { taskId: claim.id, attempt: claim.attempts, batchId };
    expect(await store.send(fence)).toBe(true);
    await store.succeed({
      fence,
      batchId,
      resultUrl: `http://kiln.test/files/r/${task.id}.png`,
      resultKey: `r/${task.id}.png`,
      previewUrl: null,
      width: 64,
      height: 64,
    });
  }
  const open = (a: TestAccount, id: string, headers: Record<string, string> = {}) =>
    fetch(`${url}/v1/batches/${id}/events`, { headers: { Authorization: bearer(a), ...headers } });

  it('answers an event stream with the headers proxies need; first connect sends the batch and the tasks already finished', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['first'], countPerCombo: 3 });
    await finish(id, 1);
    const stop = new AbortController();
    const res = await open(a, id);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('cache-control')).toBe('no-cache');
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    await res.body?.cancel();
    stop.abort();

    const first = await collect(kilnFor(a).batches.events(id), 2);
    expect(first.map((e) => e.type)).toEqual(['task', 'batch']);
    expect(first[0].type === 'task' && first[0].task).toMatchObject({ status: 'succeeded', index: 2, resultUrls: [expect.any(String)] });
    expect(first[1].type === 'batch' && first[1].batch).toMatchObject({ id, done: false, counts: { succeeded: 1 } });
  });

  it('sees every task event exactly once, as it happens, and ends after the done batch event', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['all'], countPerCombo: 4 });
    const events = collect(kilnFor(a).batches.events(id));
    for (const seq of [2, 0, 3, 1]) {
      await new Promise((r) => setTimeout(r, 50));
      await finish(id, seq);
    }
    const seen = await events;
    const ids = (await taskRows(api, id)).map((t) => t.id);
    expect(taskIds(seen).sort()).toEqual([...ids].sort());
    const last = seen.at(-1)!;
    expect(last.type === 'batch' && last.batch.done).toBe(true);
    expect(last.type === 'batch' && last.batch.counts.succeeded).toBe(4);
    // Resumed after the done event: 204, nothing more.
    const again = await open(a, id, { 'Last-Event-ID': last.id });
    expect(again.status).toBe(204);
  });

  it('a reconnect with Last-Event-ID, to another api process after a restart, replays exactly what was missed', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['resume'], countPerCombo: 6 });
    await finish(id, 0);
    await finish(id, 4);
    // The first connection takes the batch and the two finished tasks, then drops.
    const before = await collect(kilnFor(a).batches.events(id), 3);
    expect(taskIds(before)).toHaveLength(2);
    const lastId = before.at(-1)!.id;

    // Meanwhile: two more finish, on a second api process (the first one is restarted).
    const second = await bootApi(env.config);
    others.push(second);
    {
      const secondUrl = await listen(second);
      await finish(id, 1);
      await finish(id, 5);
      const resumed = collect(kilnFor(a, secondUrl).batches.events(id, { lastEventId: lastId }));
      await new Promise((r) => setTimeout(r, 300));
      await finish(id, 2);
      await finish(id, 3);
      const after = await resumed;
      const all = [...taskIds(before), ...taskIds(after)];
      expect(all.sort()).toEqual((await taskRows(api, id)).map((t) => t.id).sort());
      expect(new Set(all).size).toBe(6);
      // The resumed stream starts with what was missed, in order, and ends done.
      expect(taskIds(after).slice(0, 2)).toEqual((await taskRows(api, id)).filter((t) => [1, 5].includes(t.seq)).map((t) => t.id));
      const last = after.at(-1)!;
      expect(last.type === 'batch' && last.batch.done).toBe(true);
    }
  });

  it('streams of one batch in one api share one read per change, fanned out to each of them', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['shared'], countPerCombo: 3 });
    const events = api.app.get(BatchEvents);
    const streams = 5;
    const seen: BatchEvent[][] = Array.from({ length: streams }, () => []);
    const until = async (ok: () => boolean): Promise<void> => {
      while (!ok()) await new Promise((r) => setTimeout(r, 20));
    };
    const done = seen.map(async (into) => {
      for await (const e of kilnFor(a).batches.events(id)) into.push(e);
    });
    await until(() => seen.every((s) => s.length >= 1));
    for (const [i, seq] of [0, 2, 1].entries()) {
      const [before, roundsBefore] = [events.reads, events.sharedRounds];
      await finish(id, seq);
      await until(() => seen.every((s) => taskIds(s).length === i + 1 && s.at(-1)!.type === 'batch'));
      // Each announcement costs one batch read (two statements) and one page of tasks, for the
      // five streams together. A finish may come as one announcement or two (the claim's change
      // and the success's, gathered apart on a loaded machine); five streams reading for
      // themselves would cost 15 a round.
      // A round is counted as it starts and its reads as they are made: a second announcement's
      // round may still be reading when the streams have the event, so its reads settle first.
      const settled = Date.now() + 5000;
      while (events.reads - before !== 3 * (events.sharedRounds - roundsBefore) && Date.now() < settled) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const rounds = events.sharedRounds - roundsBefore;
      expect(rounds).toBeGreaterThanOrEqual(1);
      expect(events.reads - before).toBe(3 * rounds);
    }
    await Promise.all(done);
    const ids = (await taskRows(api, id)).map((t) => t.id).sort();
    for (const s of seen) {
      expect(taskIds(s).sort()).toEqual(ids);
      const last = s.at(-1)!;
      expect(last.type === 'batch' && last.batch.done).toBe(true);
    }
  });

  it('a stream resuming with Last-Event-ID beside a stream already reading the batch gets every event once', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['beside'], countPerCombo: 4 });
    const steady = collect(kilnFor(a).batches.events(id));
    await finish(id, 0);
    const before = await collect(kilnFor(a).batches.events(id), 2);
    expect(taskIds(before)).toHaveLength(1);
    await finish(id, 1);
    await finish(id, 2);
    await new Promise((r) => setTimeout(r, 200));
    const resumed = collect(kilnFor(a).batches.events(id, { lastEventId: before.at(-1)!.id }));
    await new Promise((r) => setTimeout(r, 200));
    await finish(id, 3);
    const after = await resumed;
    const ids = (await taskRows(api, id)).map((t) => t.id).sort();
    const all = [...taskIds(before), ...taskIds(after)];
    expect(all.length).toBe(4);
    expect(all.sort()).toEqual(ids);
    expect(taskIds(await steady).sort()).toEqual(ids);
  });

  it('refuses as a long poll does: another account 404, a key without batches:read 403, a malformed Last-Event-ID 400', async () => {
    const owner = await api.account();
    const id = await createBatch(api, owner, { model: 'eta-image', prompts: ['mine'] });
    const other = await api.account();
    const noScope = await api.account({ scopes: ['batches:write'] });
    const wrong = await open(other, id);
    expect(wrong.status).toBe(404);
    expect((await wrong.json()).error.code).toBe('not_found');
    const scope = await open(noScope, id);
    expect(scope.status).toBe(403);
    expect((await scope.json()).error.code).toBe('insufficient_scope');
    const bad = await open(owner, id, { 'Last-Event-ID': 'nonsense' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.code).toBe('invalid_request');
    expect((await open(owner, '00000000-0000-4000-8000-000000000000')).status).toBe(404);
  });

  it(`shares the key's ${MAX_HELD_PER_HOLDER} held slots with long polls: one more stream is refused 429; closing one frees it`, async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['cap'] });
    const held: Response[] = [];
    try {
      for (let i = 0; i < MAX_HELD_PER_HOLDER; i++) {
        const res = await open(a, id);
        expect(res.status).toBe(200);
        held.push(res);
      }
      const refused = await open(a, id);
      expect(refused.status).toBe(429);
      expect((await refused.json()).error.code).toBe('rate_limited');
      await held.pop()!.body!.cancel();
      await new Promise((r) => setTimeout(r, 200));
      const freed = await open(a, id);
      expect(freed.status).toBe(200);
      held.push(freed);
    } finally {
      await Promise.all(held.map((r) => r.body?.cancel() ?? Promise.resolve()));
    }
  });
  it('the dashboard twin streams to the web app as EventSource calls it: a GET with the session cookie only', async () => {
    const signup = await api.http
      .post('/v1/dashboard/signup')
      .set('X-Kiln-Session', 'cookie')
      .send({ email: `e-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`, password: 'correct horse battery staple' })
      .expect(201);
    const cookie = (signup.headers['set-cookie'] as unknown as string[]).map((c) => c.split(';')[0]).join('; ');
    const account = await api.http.get('/v1/dashboard/account').set('Cookie', cookie).expect(200);
    await api
      .admin('post', `/v1/admin/accounts/${account.body.account.id}/credits`)
      .send({ amount: 100, reason: 'test grant' })
      .expect(200);
    const created = await api.http
      .post('/v1/dashboard/batches')
      .set('Cookie', cookie)
      .set('X-Kiln-Session', 'cookie')
      .send({ model: 'eta-image', prompts: ['dash'] })
      .expect(201);
    const res = await fetch(`${url}/v1/dashboard/batches/${created.body.id}/events`, {
      headers: { Cookie: cookie, Accept: 'text/event-stream' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const text = res.text();
    await finish(created.body.id, 0);
    const body = await text;
    expect([...body.matchAll(/^event: task$/gm)]).toHaveLength(1);
    expect(body).toMatch(/^id: \d+:0;done\nevent: batch\ndata: .*"done":true/m);
  });

  // Last: closing a second api in this process breaks the first (the harness shares module
  // state between the two), so nothing uses the api after it.
  it('an api that stops ends its open streams, so it stops at once; the client has the id to resume from', async () => {
    const a = await api.account();
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['stop'], countPerCombo: 2 });
    const doomed = await bootApi(env.config);
    const doomedUrl = await listen(doomed);
    const res = await fetch(`${doomedUrl}/v1/batches/${id}/events`, { headers: { Authorization: bearer(a) } });
    expect(res.status).toBe(200);
    const text = res.text();
    await finish(id, 0);
    await new Promise((r) => setTimeout(r, 300));
    const startedAt = Date.now();
    await doomed.close();
    expect(Date.now() - startedAt).toBeLessThan(5000);
    const body = await text;
    expect([...body.matchAll(/^event: task$/gm)]).toHaveLength(1);
    expect(body).not.toMatch(/"done":true/);
    expect([...body.matchAll(/^id: (.+)$/gm)].at(-1)![1]).toMatch(/^\d+:0$/);
  });
});

/** The stream against a live Kiln: a real generator finishing the tasks, the SDK reading. */
describe('the progress stream with a real generator', () => {
  let kiln: LiveKiln;
  let restore: () => Promise<void>;
  beforeAll(async () => {
    kiln = await startLiveKiln('events-live');
    restore = await routeModel(kiln.api, 'beta-2-lite', { type: 'simulated', latencyMs: { min: 50, max: 200 } });
  });
  afterAll(async () => {
    await restore?.();
    await kiln?.close();
  });

  it('every task of a 12-image batch arrives once, then the done batch event ends the iteration', async () => {
    const a = await kiln.api.account();
    const sdk = new Kiln({ baseUrl: kiln.url, apiKey: a.key });
    const created = await sdk.batches.create({ model: 'beta-2-lite', prompts: ['one', 'two', 'three'], countPerCombo: 4 });
    const seen = await collect(sdk.batches.events(created.id));
    const ids = taskIds(seen);
    expect(ids).toHaveLength(12);
    expect(new Set(ids).size).toBe(12);
    const last = seen.at(-1)!;
    expect(last.type === 'batch' && last.batch).toMatchObject({ done: true, counts: { succeeded: 12 } });
  });
});
