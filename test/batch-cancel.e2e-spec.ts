import { TestingModule } from '@nestjs/testing';
import { BillingService } from '@app/billing';
import { KilnConfig } from '@app/config';
import { TaskRunnerService } from '@app/generation';
import {
  bearer,
  batchRow,
  createBatch,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  queueOf,
  routeModel,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(120_000);

/**
 * POST /v1/batches/{id}/cancel with the real generator consuming the real queue: what is not
 * yet in a provider's hands is cancelled and refunded once, in one cancel_refund row; what is
 * finishes; money is exact under any interleaving.
 */
describe('cancel', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;

  beforeAll(async () => {
    env = await fileEnvironment('cancel', {
      generator: { concurrency: 8, maxAttempts: 3, backoffMs: 20, reconcileIntervalMs: 600_000 },
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

  const cancel = (a: TestAccount, id: string) => api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a));
  const ledger = (batchId: string): Promise<{ kind: string; amount: string; task_id: string | null; api_key_id: string | null }[]> =>
    api.db.query(
      `SELECT kind, amount, task_id, api_key_id FROM ledger_entries WHERE batch_id = $1 AND kind <> 'batch_charge' ORDER BY id`,
      [batchId],
    );
  const usedToday = (a: TestAccount) => api.app.get(BillingService).creditsUsedToday(a.keyId);

  describe('with the queue paused (nothing is sent)', () => {
    // Paused for every worker (in Redis, under this file's prefix): a local pause disconnects
    // Bull's blocking client, and a pause that races its connecting rejects with
    // "Connection is closed" (seen under load in the full suite).
    beforeAll(() => queueOf(gen).pause());
    afterAll(() => queueOf(gen).resume());

    it('cancels every waiting task in one transaction: one cancel_refund row, balance and daily use back, status cancelled, done', async () => {
      const a = await api.account({ credits: 100 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['a', 'b', 'c'], countPerCombo: 2 });
      const charged = 100 - (await api.balance(a.id));
      expect(charged).toBeGreaterThan(0);
      expect(await usedToday(a)).toBe(charged);

      const res = await cancel(a, id).expect(200);
      expect(res.body).toMatchObject({
        id,
        status: 'cancelled',
        done: true,
        counts: { pending: 0, running: 0, succeeded: 0, failed: 0, cancelled: 6 },
        creditsCharged: charged,
        creditsRefunded: charged,
      });
      expect(typeof res.body.cancelledAt).toBe('number');
      expect(await api.balance(a.id)).toBe(100);
      expect(await api.ledgerSum(a.id)).toBe(100);
      expect(await ledger(id)).toEqual([{ kind: 'cancel_refund', amount: String(charged), task_id: null, api_key_id: a.keyId }]);
      expect(await usedToday(a)).toBe(0);
      expect((await taskRows(api, id)).map((t) => t.status)).toEqual(Array(6).fill('cancelled'));
      expect((await batchRow(api, id)).finished_at).not.toBeNull();
      const { tasks } = await getBatch(api, a, id);
      expect(tasks.every((t) => t.status === 'cancelled' && t.progress === 0 && t.resultUrls.length === 0)).toBe(true);

      // Again: 200, nothing changes.
      const again = await cancel(a, id).expect(200);
      expect(again.body).toEqual(res.body);
      expect(await ledger(id)).toHaveLength(1);
      expect(await api.balance(a.id)).toBe(100);

      // Their jobs, dequeued later, do nothing.
      const runner = gen.get(TaskRunnerService);
      for (const t of await taskRows(api, id)) expect(await runner.run(t.id)).toBe('skipped');
      expect(await api.balance(a.id)).toBe(100);
    });

    it('a cancelled batch stops counting toward maxConcurrentBatches once done', async () => {
      const a = await api.account({ plan: 'starter', credits: 100 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['one'] });
      const refused = await api.http
        .post('/v1/batches')
        .set('Authorization', bearer(a))
        .send({ model: 'eta-image', prompts: ['two'] });
      expect(refused.status).toBe(403);
      expect(refused.body.error.code).toBe('concurrent_limit_exceeded');
      await cancel(a, id).expect(200);
      await createBatch(api, a, { model: 'eta-image', prompts: ['two'] });
    });

    it("another account's batch, an unknown or malformed id: 404 not_found, nothing changes", async () => {
      const a = await api.account({ credits: 100 });
      const b = await api.account({ credits: 100 });
      const id = await createBatch(api, a, { model: 'eta-image', prompts: ['mine'] });
      for (const other of [id, '00000000-0000-4000-8000-000000000000', 'nope']) {
        const res = await cancel(b, other);
        expect(res.status).toBe(404);
        expect(res.body.error.code).toBe('not_found');
      }
      expect((await taskRows(api, id))[0].status).not.toBe('cancelled');
      expect(await ledger(id)).toEqual([]);
    });

    it('needs batches:write', async () => {
      const a = await api.account({ credits: 100, scopes: ['batches:read'] });
      const owner = await api.account({ credits: 100 });
      const id = await createBatch(api, owner, { model: 'eta-image', prompts: ['x'] });
      const res = await cancel(a, id);
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('insufficient_scope');
    });

    it('the dashboard twin cancels with a session token', async () => {
      const signup = await api.http
        .post('/v1/dashboard/signup')
        .send({ email: `c-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`, password: 'correct horse battery staple' })
        .expect(201);
      const session = `Bearer ${signup.body.token}`;
      const account = await api.http.get('/v1/dashboard/account').set('Authorization', session).expect(200);
      await api
        .admin('post', `/v1/admin/accounts/${account.body.account.id}/credits`)
        .send({ amount: 100, reason: 'test grant' })
        .expect(200);
      const created = await api.http
        .post('/v1/dashboard/batches')
        .set('Authorization', session)
        .send({ model: 'eta-image', prompts: ['dash'] })
        .expect(201);
      const res = await api.http.post(`/v1/dashboard/batches/${created.body.id}/cancel`).set('Authorization', session).expect(200);
      expect(res.body).toMatchObject({ id: created.body.id, status: 'cancelled', counts: { cancelled: 1 } });
    });
  });

  it('a batch that finished without a cancel: 409 batch_not_cancellable, nothing changes', async () => {
    const a = await api.account({ credits: 100 });
    const id = await createBatch(api, a, { model: 'eta-image', prompts: ['done'] });
    await waitForBatchDone(api, id);
    const balance = await api.balance(a.id);
    const res = await cancel(a, id);
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('batch_not_cancellable');
    expect((await batchRow(api, id)).cancelled_at).toBeNull();
    expect(await api.balance(a.id)).toBe(balance);
  });

  it('tasks waiting for the model slot are cancelled; only the one holding the slot may succeed', async () => {
    const a = await api.account({ credits: 1000 });
    const restore = await routeModel(api, 'gamma-5-flash', { type: 'simulated', latencyMs: 1500, maxConcurrency: 1 });
    try {
      const id = await createBatch(api, a, { model: 'gamma-5-flash', prompts: ['slot'], countPerCombo: 6 });
      const unitCost = (await batchRow(api, id)).unit_cost;
      // One task holds the slot, claimed and sent; the generator's other runs wait for the slot
      // unclaimed (their jobs name the batch: generator.e2e-spec covers claim-first jobs too).
      await waitFor('one claimed and sent, five waiting', async () => {
        const rows = await taskRows(api, id);
        return (
          rows.filter((t) => t.status === 'running' && t.sent_at).length === 1 && rows.filter((t) => t.status === 'queued').length === 5
        );
      });
      const shown = await getBatch(api, a, id);
      expect(shown.batch.counts).toMatchObject({ pending: 5, running: 1 });
      expect(shown.tasks.filter((t) => t.status === 'queued')).toHaveLength(5);

      const res = await cancel(a, id).expect(200);
      expect(res.body).toMatchObject({ status: 'running', done: false, counts: { pending: 0, running: 1, cancelled: 5 } });
      await waitForBatchDone(api, id);
      const rows = await taskRows(api, id);
      expect(rows.filter((t) => t.status === 'succeeded')).toHaveLength(1);
      expect(rows.filter((t) => t.status === 'cancelled')).toHaveLength(5);
      // The cancelled ones were never sent, whatever the workers did after getting the slot.
      expect(rows.filter((t) => t.sent_at)).toHaveLength(1);
      const { batch } = await getBatch(api, a, id);
      expect(batch).toMatchObject({
        status: 'cancelled',
        done: true,
        creditsRefunded: 5 * unitCost,
        counts: { succeeded: 1, cancelled: 5 },
      });
      expect((await batchRow(api, id)).status).toBe('cancelled');
      expect(await api.balance(a.id)).toBe(1000 - unitCost);
      expect(await api.ledgerSum(a.id)).toBe(1000 - unitCost);
      expect(await ledger(id)).toEqual([{ kind: 'cancel_refund', amount: String(5 * unitCost), task_id: null, api_key_id: a.keyId }]);
      expect(await usedToday(a)).toBe(unitCost);
    } finally {
      await restore();
    }
  });

  it('cancel racing successes, failures and retries: money exact over several rounds', async () => {
    const a = await api.account({ credits: 20_000 });
    const restore = await routeModel(api, 'gamma-5-flash', {
      type: 'simulated',
      latencyMs: { min: 5, max: 60 },
      failureRate: 0.25,
      rateLimitRate: 0.25,
      maxConcurrency: 4,
    });
    const seen = { succeeded: 0, failed: 0, cancelled: 0 };
    try {
      for (let round = 0; round < 8; round++) {
        const id = await createBatch(api, a, { model: 'gamma-5-flash', prompts: [`round ${round}`], countPerCombo: 20 });
        // From at once to when most of the batch is over. On a fast machine a late round's
        // batch may be over before its cancel: refused then (409), with nothing changed.
        await new Promise((r) => setTimeout(r, 25 * round));
        const answer = await cancel(a, id);
        if (answer.status === 409) {
          expect(answer.body.error.code).toBe('batch_not_cancellable');
          expect((await getBatch(api, a, id)).batch.done).toBe(true);
        } else {
          expect(answer.status).toBe(200);
        }
        await waitForBatchDone(api, id, 60_000);

        const rows = await taskRows(api, id);
        const by = (s: string) => rows.filter((t) => t.status === s).length;
        const { batch } = await getBatch(api, a, id);
        const unitCost = (await batchRow(api, id)).unit_cost;
        expect(by('succeeded') + by('failed') + by('cancelled')).toBe(20);
        const c = batch.counts;
        expect(c.pending + c.running + c.succeeded + c.failed + c.cancelled).toBe(20);
        expect(c).toMatchObject({ pending: 0, running: 0, succeeded: by('succeeded'), failed: by('failed'), cancelled: by('cancelled') });
        const entries = await ledger(id);
        const taskRefunds = entries.filter((e) => e.kind === 'task_refund');
        const cancelRefunds = entries.filter((e) => e.kind === 'cancel_refund');
        // Each failed task refunded once, each cancelled one once, and none both.
        expect(new Set(taskRefunds.map((e) => e.task_id))).toEqual(new Set(rows.filter((t) => t.status === 'failed').map((t) => t.id)));
        expect(taskRefunds).toHaveLength(by('failed'));
        expect(cancelRefunds.reduce((s, e) => s + Number(e.amount), 0)).toBe(by('cancelled') * unitCost);
        expect(batch.creditsRefunded).toBe((by('failed') + by('cancelled')) * unitCost);
        // The stored status (the generator's tallies, in SQL) agrees with the one shown.
        expect((await batchRow(api, id)).status).toBe(batch.status);
        seen.succeeded += by('succeeded');
        seen.failed += by('failed');
        seen.cancelled += by('cancelled');
        expect(batch.status).toBe(
          by('cancelled') > 0 ? 'cancelled' : by('failed') === 0 ? 'succeeded' : by('succeeded') === 0 ? 'failed' : 'partial',
        );
      }
      const [spent] = await api.db.query(
        `SELECT COALESCE(sum(b.unit_cost), 0)::int AS n FROM tasks t JOIN batches b ON b.id = t.batch_id
          WHERE t.account_id = $1 AND t.status = 'succeeded'`,
        [a.id],
      );
      expect(await api.balance(a.id)).toBe(20_000 - spent.n);
      expect(await api.ledgerSum(a.id)).toBe(20_000 - spent.n);
      expect(await usedToday(a)).toBe(spent.n);
      // The rounds did race the cancel against every outcome.
      expect(seen.succeeded).toBeGreaterThan(0);
      expect(seen.failed).toBeGreaterThan(0);
      expect(seen.cancelled).toBeGreaterThan(0);
    } finally {
      await restore();
    }
  });
});
