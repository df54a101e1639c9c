import { TestingModule } from '@nestjs/testing';
import { TaskRunnerService } from '@app/generation';
import {
  batchCount,
  batchRow,
  bearer,
  createBatch,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  postBatch,
  queueOf,
  routeModel,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { BatchDeadlines } from '@app/tasks';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(120_000);

const DAY_MS = 24 * 60 * 60_000;

/**
 * `deadline` on POST /v1/batches (docs/api.md#deadlines): validated with nothing charged;
 * past it, tasks not yet sent are cancelled and refunded as a cancel would (one cancel_refund
 * row), tasks already sent finish, and the batch (and its batch.completed event) says so.
 */
describe('batch deadlines', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;

  beforeAll(async () => {
    env = await fileEnvironment('deadline', {
      generator: { concurrency: 8, maxAttempts: 3, backoffMs: 20, reconcileIntervalMs: 300 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await env?.teardown();
  });

  const ledger = (batchId: string): Promise<{ kind: string; amount: string; task_id: string | null }[]> =>
    api.db.query(`SELECT kind, amount, task_id FROM ledger_entries WHERE batch_id = $1 AND kind <> 'batch_charge' ORDER BY id`, [batchId]);

  /** Every task ended once: a cancelled one was never sent; refunds match, balance equals the ledger. */
  async function expectMoneyExact(a: TestAccount, credits: number, ids: string[]): Promise<void> {
    let spent = 0;
    for (const id of ids) {
      const rows = await taskRows(api, id);
      const unit = (await batchRow(api, id)).unit_cost as number;
      const by = (s: string) => rows.filter((t) => t.status === s);
      expect(by('succeeded').length + by('failed').length + by('cancelled').length).toBe(rows.length);
      expect(by('cancelled').every((t) => t.sent_at === null)).toBe(true);
      const entries = await ledger(id);
      const cancelRefunds = entries.filter((e) => e.kind === 'cancel_refund').reduce((s, e) => s + Number(e.amount), 0);
      expect(cancelRefunds).toBe(by('cancelled').length * unit);
      expect(new Set(entries.filter((e) => e.kind === 'task_refund').map((e) => e.task_id))).toEqual(
        new Set(by('failed').map((t) => t.id)),
      );
      expect(entries.filter((e) => e.kind === 'task_refund')).toHaveLength(by('failed').length);
      spent += by('succeeded').length * unit;
    }
    expect(await api.balance(a.id)).toBe(credits - spent);
    expect(await api.ledgerSum(a.id)).toBe(credits - spent);
  }

  describe('creation', () => {
    const ok = { prompts: ['a red fox'], model: 'eta-image' };

    it.each([
      ['not an integer', () => 1.5, 'isInt'],
      ['a string', () => 'soon', 'isInt'],
      ['in the past', () => Date.now() - 1000, 'in_past'],
      ['more than 7 days ahead', () => Date.now() + 7 * DAY_MS + 60_000, 'too_far'],
    ])('%s: 400 invalid_request on deadline, nothing charged or written', async (_, deadline, reason) => {
      const a = await api.account({ credits: 100 });
      const res = await postBatch(api, a, { ...ok, deadline: deadline() });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'deadline', reason } });
      expect(await api.balance(a.id)).toBe(100);
      expect(await api.ledgerSum(a.id)).toBe(100);
      expect(await batchCount(api, a.id)).toBe(0);
    });

    it('economy refuses a deadline (its own window bounds it): 400 invalid_request on deadline', async () => {
      const a = await api.account({ credits: 100 });
      const res = await postBatch(api, a, { ...ok, tier: 'economy', deadline: Date.now() + 60_000 });
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'invalid_request', details: { field: 'deadline', reason: 'not_allowed_with_economy' } });
      expect(await batchCount(api, a.id)).toBe(0);
      expect(await api.balance(a.id)).toBe(100);
    });

    it('the batch shows its deadline (null without one) and no cancelReason while it runs to the end in time', async () => {
      const a = await api.account({ credits: 100 });
      const deadline = Date.now() + 60_000;
      const withOne = await createBatch(api, a, { ...ok, deadline });
      const without = await createBatch(api, a, { ...ok, deadline: null });
      await waitForBatchDone(api, withOne);
      await waitForBatchDone(api, without);
      expect((await getBatch(api, a, withOne)).batch).toMatchObject({
        deadline,
        cancelReason: null,
        cancelledAt: null,
        status: 'succeeded',
      });
      expect((await getBatch(api, a, without)).batch).toMatchObject({ deadline: null, cancelReason: null });
      const listed = await api.http.get('/v1/batches').set('Authorization', bearer(a)).expect(200);
      expect(listed.body.batches.find((b: { id: string }) => b.id === withOne)).toMatchObject({ deadline });
    });
  });

  it('a short deadline behind a slow route: what was sent succeeds, the rest is cancelled and refunded once; batch.completed says so', async () => {
    const a = await api.account({ credits: 1000 });
    await api.http
      .post('/v1/webhooks')
      .set('Authorization', bearer(a))
      .send({ url: 'https://93.184.216.34/kiln-hook', events: ['batch.completed'] })
      .expect(201);
    const restore = await routeModel(api, 'gamma-5-flash', { type: 'simulated', latencyMs: 3000, maxConcurrency: 1 });
    try {
      const deadline = Date.now() + 2000;
      const id = await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['late'], countPerCombo: 6, deadline });
      await waitForBatchDone(api, id, 60_000);
      const rows = await taskRows(api, id);
      const succeeded = rows.filter((t) => t.status === 'succeeded');
      const cancelled = rows.filter((t) => t.status === 'cancelled');
      expect(succeeded.length).toBeGreaterThanOrEqual(1);
      expect(cancelled.length).toBeGreaterThanOrEqual(1);
      expect(succeeded.length + cancelled.length).toBe(6);
      // Nothing was sent after the deadline.
      for (const t of rows.filter((r) => r.sent_at)) expect(new Date(t.sent_at).getTime()).toBeLessThanOrEqual(deadline);
      const unit = (await batchRow(api, id)).unit_cost as number;
      const { batch } = await getBatch(api, a, id);
      expect(batch).toMatchObject({
        deadline,
        cancelReason: 'deadline',
        cancelledAt: expect.any(Number),
        status: 'cancelled',
        done: true,
        creditsRefunded: cancelled.length * unit,
        counts: { succeeded: succeeded.length, cancelled: cancelled.length },
      });
      expect(batch.cancelledAt).toBeGreaterThanOrEqual(deadline);
      expect(await ledger(id)).toEqual([{ kind: 'cancel_refund', amount: String(cancelled.length * unit), task_id: null }]);
      await expectMoneyExact(a, 1000, [id]);

      const [event] = await api.db.query(`SELECT body FROM webhook_deliveries WHERE account_id = $1 AND type = 'batch.completed'`, [a.id]);
      const body = typeof event.body === 'string' ? JSON.parse(event.body) : event.body;
      expect(body.data).toMatchObject({
        id,
        deadline,
        cancelReason: 'deadline',
        status: 'cancelled',
        counts: { cancelled: cancelled.length },
      });

      // A cancel after the deadline's changes nothing: the batch is done.
      const again = await api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a));
      expect(again.status).toBe(200);
      expect(await ledger(id)).toHaveLength(1);
    } finally {
      await restore();
    }
  });

  describe('with the queue paused (the test runs the tasks)', () => {
    beforeAll(() => queueOf(gen).pause());
    afterAll(() => queueOf(gen).resume());

    it('a task claimed right at the deadline either runs or is refunded, never both: money exact over several rounds', async () => {
      const a = await api.account({ credits: 10_000 });
      const runner = gen.get(TaskRunnerService);
      const deadlines = gen.get(BatchDeadlines);
      const ids: string[] = [];
      const seen = { succeeded: 0, cancelled: 0 };
      // The first round starts its runs well before the deadline so that one round succeeds even
      // when creating the batch is slow on a loaded machine; the deadline leaves room for that.
      for (const offset of [-1000, -40, -15, -5, 0, 5, 15]) {
        const deadline = Date.now() + 1500;
        const id = await createBatch(api, a, { model: 'eta-image', prompts: [`edge ${offset}`], countPerCombo: 8, deadline });
        ids.push(id);
        const tasks = await taskRows(api, id);
        await new Promise((r) => setTimeout(r, Math.max(0, deadline + offset - Date.now())));
        // The runs and the sweep race at the deadline, as a claim and the reconciler would.
        await Promise.all([
          ...tasks.map((t) => runner.run(t.id)),
          ...[0, 5, 10].map((ms) => new Promise((r) => setTimeout(r, ms)).then(() => deadlines.cancelPastDeadline(id))),
        ]);
        await waitFor('the deadline to pass', () => Date.now() > deadline + 10);
        await deadlines.cancelPastDeadline(id);
        await waitForBatchDone(api, id);
        const rows = await taskRows(api, id);
        seen.succeeded += rows.filter((t) => t.status === 'succeeded').length;
        seen.cancelled += rows.filter((t) => t.status === 'cancelled').length;
        // A task that was sent ran; one that was not was never sent afterwards.
        for (const t of rows) expect(t.status === 'succeeded' ? t.sent_at !== null : t.sent_at === null).toBe(true);
        // Nothing is sent at or after the deadline (the claim and the send refuse).
        for (const t of rows.filter((r) => r.sent_at)) expect(new Date(t.sent_at).getTime()).toBeLessThan(deadline);
        // Later deliveries of their jobs do nothing.
        for (const t of rows) expect(await runner.run(t.id)).toBe('skipped');
      }
      await expectMoneyExact(a, 10_000, ids);
      expect(seen.succeeded).toBeGreaterThan(0);
      expect(seen.cancelled).toBeGreaterThan(0);
    });

    it('a batch its caller cancelled before the deadline keeps a null cancelReason', async () => {
      const a = await api.account({ credits: 100 });
      const deadline = Date.now() + 400;
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['mine'], countPerCombo: 2, deadline });
      await api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a)).expect(200);
      await waitFor('the deadline to pass', () => Date.now() > deadline + 10);
      expect(await gen.get(BatchDeadlines).cancelPastDeadline(id)).toBeNull();
      expect((await getBatch(api, a, id)).batch).toMatchObject({ deadline, cancelReason: null, status: 'cancelled' });
      expect(await ledger(id)).toHaveLength(1);
      await expectMoneyExact(a, 100, [id]);
    });
  });
});
