import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { buildConfig, KilnConfig } from '@app/config';
import { KilnMetrics } from '@app/metrics';
import { SIMULATED_BATCH_MARKERS } from '@app/providers';
import { ECONOMY_EXPIRED_MESSAGE, TaskStateStore } from '@app/tasks';
import {
  bearer,
  createBatch,
  download,
  getBatch,
  fileEnvironment,
  FileEnvironment,
  recordSql,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { economyBatch, expectMoneyExact, simulatedBatchRoute, simulatedStateDir, simulatedSubmissions } from './helpers/economy';

jest.setTimeout(90_000);

const GRANTED = 100_000;

/**
 * The economy tier's collector on the simulated route's local batch API, in-process: waiting
 * economy tasks gathered into upstream batches, results stored like a standard task's, each
 * failed line refunded once with its own code, what an upstream batch never ran refunded,
 * the window's end, and standard work never waiting behind economy work.
 */
describe('economy tier: the collector on the simulated batch API', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule | null = null;
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-economy-'));

  beforeAll(async () => {
    const base = buildConfig(process.env);
    env = await fileEnvironment('economy_collector', {
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
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  async function account(): Promise<TestAccount> {
    return api.account({ plan: 'scale', credits: GRANTED });
  }

  it('gathers the tasks into one upstream batch, stores each image like a standard result, refunds a refusal and a failed line with their own codes; money exact', async () => {
    const a = await account();
    const prompts = [
      ...Array.from({ length: 8 }, (_, i) => `economy ${i}`),
      `refuse me ${SIMULATED_BATCH_MARKERS.refuse}`,
      `fail me ${SIMULATED_BATCH_MARKERS.fail}`,
    ];
    const route = simulatedBatchRoute({ delayMs: 300 }, { cost: { '1K': 0.04, economy: { '1K': 0.02 } } });
    // Webhook events fire as economy tasks end, as for standard ones (the outbox rows, written with each end).
    await api.http
      .post('/v1/webhooks')
      .set('Authorization', bearer(a))
      .send({ url: 'https://93.184.216.34/kiln-hook', events: ['task.succeeded', 'task.failed', 'batch.completed'] })
      .expect(201);
    const id = await economyBatch(api, a, route, prompts);
    const created = await getBatch(api, a, id);
    expect(created.batch).toMatchObject({ tier: 'economy', expiresAt: expect.any(Number) });
    gen = await bootGenerator(config);
    await waitForBatchDone(api, id, 60_000);

    const tasks = await taskRows(api, id);
    const groups = new Set(tasks.map((t) => t.upstream_batch_id));
    expect(groups.size).toBe(1);
    const [group] = await api.db.query(`SELECT * FROM upstream_batches WHERE id = $1`, [[...groups][0]]);
    expect(group).toMatchObject({ state: 'read', lines: 10, succeeded_count: 8, failed_count: 2, outcome: 'completed', poller: null });
    expect(group.upstream_batch_id).toMatch(/^sim-batch-/);
    expect(group.input_id).toMatch(/^sim-input-/);

    const ok = tasks.filter((t) => t.status === 'succeeded');
    expect(ok).toHaveLength(8);
    for (const t of ok) {
      expect(t.result_key).toMatch(new RegExp(`^results/${t.result_token}/kiln-${id.slice(0, 8)}-\\d{4}\\.png$`));
      expect(t.attempts).toBe(1);
      // The route's economy price, not its list price.
      expect(Number(t.upstream_cost_micros)).toBe(20_000);
    }
    const file = await download(api, ok[0].result_url);
    expect(file.status).toBe(200);
    const meta = await sharp(file.body).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['png', 64, 64]);

    const refused = tasks.find((t) => t.prompt.includes(SIMULATED_BATCH_MARKERS.refuse))!;
    expect(refused).toMatchObject({ status: 'failed', error_code: 'content_refused', result_key: null });
    const failed = tasks.find((t) => t.prompt.includes(SIMULATED_BATCH_MARKERS.fail))!;
    expect(failed).toMatchObject({ status: 'failed', error_code: 'upstream_unavailable', error: 'Simulated upstream failure' });
    expect(Number(failed.upstream_cost_micros)).toBe(0);

    const submitted = simulatedSubmissions(dataDir);
    for (const t of tasks) expect(submitted.get(t.id)).toBe(1);
    await expectMoneyExact(api, a, id, GRANTED);
    const [batch] = await api.db.query(`SELECT status, succeeded_count, failed_count FROM batches WHERE id = $1`, [id]);
    expect(batch).toEqual({ status: 'partial', succeeded_count: 8, failed_count: 2 });

    expect(await eventCounts(a)).toEqual([
      { type: 'batch.completed', n: 1 },
      { type: 'task.failed', n: 2 },
      { type: 'task.succeeded', n: 8 },
    ]);

    const metrics = (await gen.get(KilnMetrics).render()).body;
    expect(metrics).toContain('kiln_economy_upstream_batches_formed_total{model="eta-image"} 1');
    expect(metrics).toContain('kiln_economy_lines_total{model="eta-image",outcome="succeeded"} 8');
    expect(metrics).toContain('kiln_economy_lines_total{model="eta-image",outcome="failed"} 2');
    expect(metrics).toContain('kiln_economy_upstream_batches{state="created"} 0');
    expect(metrics).toContain('kiln_economy_tasks_waiting 0');
  });

  it('makes upstream batches of at most maxRequests lines; every task submitted once', async () => {
    const a = await account();
    const prompts = Array.from({ length: 25 }, (_, i) => `split ${i}`);
    const id = await economyBatch(api, a, simulatedBatchRoute({ maxRequests: 10 }), prompts);
    gen = await bootGenerator(config);
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.every((t) => t.status === 'succeeded')).toBe(true);
    const sizes: { lines: number }[] = await api.db.query(
      `SELECT lines FROM upstream_batches WHERE id IN (SELECT upstream_batch_id FROM tasks WHERE batch_id = $1) ORDER BY lines DESC`,
      [id],
    );
    expect(sizes.map((s) => s.lines)).toEqual([10, 10, 5]);
    const submitted = simulatedSubmissions(dataDir);
    for (const t of tasks) expect(submitted.get(t.id)).toBe(1);
    await expectMoneyExact(api, a, id, GRANTED);
  });

  it('an upstream batch that expires: what it made is stored, what it never ran is failed and refunded once', async () => {
    const a = await account();
    const prompts = [
      ...Array.from({ length: 4 }, (_, i) => `made ${i}`),
      ...Array.from({ length: 3 }, (_, i) => `never ran ${i} ${SIMULATED_BATCH_MARKERS.expire}`),
    ];
    const id = await economyBatch(api, a, simulatedBatchRoute(), prompts);
    gen = await bootGenerator(config);
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.filter((t) => t.status === 'succeeded').map((t) => t.prompt)).toEqual(prompts.slice(0, 4));
    const lost = tasks.filter((t) => t.status === 'failed');
    expect(lost.map((t) => t.prompt)).toEqual(prompts.slice(4));
    for (const t of lost)
      expect(t).toMatchObject({ error_code: 'upstream_unavailable', error: 'The upstream batch expired before this image was made' });
    const [group] = await api.db.query(`SELECT state, outcome, succeeded_count, failed_count FROM upstream_batches WHERE id = $1`, [
      tasks[0].upstream_batch_id,
    ]);
    expect(group).toEqual({ state: 'read', outcome: 'expired', succeeded_count: 4, failed_count: 3 });
    await expectMoneyExact(api, a, id, GRANTED);
  });

  /** Runs `body` with the scale plan allowing `images` per batch (the grouped-failure tests need 1,000-image batches). */
  async function withLargeBatches<T>(images: number, body: () => Promise<T>): Promise<T> {
    await api.admin('patch', '/v1/admin/plans/scale').send({ maxImagesPerBatch: images }).expect(200);
    try {
      return await body();
    } finally {
      await api.admin('patch', '/v1/admin/plans/scale').send({ maxImagesPerBatch: 100 }).expect(200);
    }
  }

  /** The statements that failed tasks and that wrote ledger rows while `work` ran. */
  async function failureWritesDuring(work: () => Promise<unknown>): Promise<{ taskFails: number; ledgerInserts: number }> {
    const recorder = recordSql();
    try {
      await work();
    } finally {
      recorder.restore();
    }
    const statements = recorder.statements();
    return {
      taskFails: statements.filter((q) => q.startsWith("UPDATE tasks t SET status = 'failed'")).length,
      ledgerInserts: statements.filter((q) => q.includes('INSERT INTO ledger_entries')).length,
    };
  }

  /** The account's webhook deliveries, counted by event type. */
  function eventCounts(a: TestAccount): Promise<{ type: string; n: number }[]> {
    return api.db.query(`SELECT type, count(*)::int AS n FROM webhook_deliveries WHERE account_id = $1 GROUP BY type ORDER BY type`, [
      a.id,
    ]);
  }

  /** Every ledger row's balance_after is the running sum of the account's rows in id order. */
  async function expectRunningBalances(a: TestAccount): Promise<void> {
    const rows: { amount: string; balance_after: string }[] = await api.db.query(
      `SELECT amount, balance_after FROM ledger_entries WHERE account_id = $1 ORDER BY id`,
      [a.id],
    );
    let running = 0;
    for (const r of rows) {
      running += Number(r.amount);
      expect(Number(r.balance_after)).toBe(running);
    }
    expect(running).toBe(await api.balance(a.id));
  }

  it('2,000 lines an upstream batch never ran: each failed and refunded once, in a few dozen statements (not one transaction per task); events and tallies as one by one', async () => {
    const a = await account();
    const b = await account();
    await api.http
      .post('/v1/webhooks')
      .set('Authorization', bearer(a))
      .send({ url: 'https://93.184.216.34/kiln-hook', events: ['task.succeeded', 'task.failed', 'batch.completed'] })
      .expect(201);
    // Two accounts' batches in one upstream batch: 5 images made, 1,995 never run.
    const route = simulatedBatchRoute({ maxRequests: 2500, delayMs: 300 });
    const aPrompts = Array.from({ length: 1000 }, (_, i) => (i < 5 ? `made ${i}` : `unrun a${i} ${SIMULATED_BATCH_MARKERS.expire}`));
    const bPrompts = Array.from({ length: 1000 }, (_, i) => `unrun b${i} ${SIMULATED_BATCH_MARKERS.expire}`);
    const [first, second] = await withLargeBatches(1000, async () => [
      await economyBatch(api, a, route, aPrompts),
      await economyBatch(api, b, route, bPrompts),
    ]);

    const writes = await failureWritesDuring(async () => {
      gen = await bootGenerator(config);
      await waitForBatchDone(api, first, 90_000);
      await waitForBatchDone(api, second, 90_000);
    });
    // One transaction per task wrote 1,995 task updates and 1,995 ledger inserts; a chunk of
    // 250 per transaction writes 8 of each (9 if the two batches' tasks split unevenly).
    expect(writes.taskFails).toBeGreaterThanOrEqual(8);
    expect(writes.taskFails).toBeLessThanOrEqual(12);
    expect(writes.ledgerInserts).toBeLessThanOrEqual(12);

    const tasks = [...(await taskRows(api, first)), ...(await taskRows(api, second))];
    const groups = new Set(tasks.map((t) => t.upstream_batch_id));
    expect(groups.size).toBe(1);
    const [group] = await api.db.query(`SELECT state, outcome, succeeded_count, failed_count FROM upstream_batches WHERE id = $1`, [
      [...groups][0],
    ]);
    expect(group).toEqual({ state: 'read', outcome: 'expired', succeeded_count: 5, failed_count: 1995 });
    expect(tasks.filter((t) => t.status === 'succeeded').map((t) => t.prompt)).toEqual(aPrompts.slice(0, 5));
    const lost = tasks.filter((t) => t.status === 'failed');
    expect(lost).toHaveLength(1995);
    for (const t of lost)
      expect(t).toMatchObject({
        error_code: 'upstream_unavailable',
        error: 'The upstream batch expired before this image was made',
        attempts: 1,
      });

    await expectMoneyExact(api, a, first, GRANTED);
    await expectMoneyExact(api, b, second, GRANTED);
    await expectRunningBalances(a);
    await expectRunningBalances(b);
    const [byKey] = await api.db.query(
      `SELECT count(*)::int AS refunds, count(*) FILTER (WHERE r.charge_day = c.charge_day AND r.api_key_id IS NOT DISTINCT FROM c.api_key_id)::int AS matching
         FROM ledger_entries r JOIN ledger_entries c ON c.batch_id = r.batch_id AND c.kind = 'batch_charge'
        WHERE r.kind = 'task_refund' AND r.batch_id = ANY($1::uuid[])`,
      [[first, second]],
    );
    // Each refund carries its batch's charge key and day, as a single refund does (the daily cap).
    expect(byKey).toEqual({ refunds: 1995, matching: 1995 });
    const batches = await api.db.query(
      `SELECT id, status, succeeded_count, failed_count, credits_refunded FROM batches WHERE id = ANY($1::uuid[]) ORDER BY failed_count`,
      [[first, second]],
    );
    expect(batches).toEqual([
      { id: first, status: 'partial', succeeded_count: 5, failed_count: 995, credits_refunded: 995 },
      { id: second, status: 'failed', succeeded_count: 0, failed_count: 1000, credits_refunded: 1000 },
    ]);
    expect(await eventCounts(a)).toEqual([
      { type: 'batch.completed', n: 1 },
      { type: 'task.failed', n: 995 },
      { type: 'task.succeeded', n: 5 },
    ]);

    // The fence: failing the same attempts again (a duplicate read, a second generator) changes nothing.
    const ledgerRows = async () =>
      (await api.db.query(`SELECT count(*)::int AS n FROM ledger_entries WHERE account_id = ANY($1::uuid[])`, [[a.id, b.id]]))[0].n;
    const before = await ledgerRows();
    const again = await gen!
      .get(TaskStateStore)
      .failMany(
        lost.map((t) => ({ fence: { taskId: t.id, attempt: t.attempts, batchId: t.batch_id }, message: 'again', code: 'internal' })),
      );
    expect(again.every((r) => r === null)).toBe(true);
    expect(await ledgerRows()).toBe(before);
    await expectMoneyExact(api, a, first, GRANTED);
    await expectMoneyExact(api, b, second, GRANTED);
  });

  it("1,000 lines of which 990 fail upstream (refusals and failures): each refunded once with its line's own code, in a handful of statements (not one transaction per line)", async () => {
    const a = await account();
    await api.http
      .post('/v1/webhooks')
      .set('Authorization', bearer(a))
      .send({ url: 'https://93.184.216.34/kiln-hook', events: ['task.succeeded', 'task.failed', 'batch.completed'] })
      .expect(201);
    // Every 100th line makes an image; of the others, odd lines fail and even ones are refused.
    const prompts = Array.from({ length: 1000 }, (_, i) =>
      i % 100 === 0
        ? `made ${i}`
        : i % 2 === 1
          ? `fail ${i} ${SIMULATED_BATCH_MARKERS.fail}`
          : `refuse ${i} ${SIMULATED_BATCH_MARKERS.refuse}`,
    );
    const id = await withLargeBatches(1000, () => economyBatch(api, a, simulatedBatchRoute({ maxRequests: 1000, delayMs: 300 }), prompts));

    const writes = await failureWritesDuring(async () => {
      gen = await bootGenerator(config);
      await waitForBatchDone(api, id, 90_000);
    });
    // One transaction per failed line wrote 990 task updates and 990 ledger inserts; the failed
    // lines of a read written together (250 per transaction, or whatever a second's reading
    // gathered) write a few of each.
    expect(writes.taskFails).toBeGreaterThanOrEqual(4);
    expect(writes.taskFails).toBeLessThanOrEqual(20);
    expect(writes.ledgerInserts).toBeLessThanOrEqual(20);

    const tasks = await taskRows(api, id);
    expect(new Set(tasks.map((t) => t.upstream_batch_id)).size).toBe(1);
    const [group] = await api.db.query(`SELECT state, outcome, lines, succeeded_count, failed_count FROM upstream_batches WHERE id = $1`, [
      tasks[0].upstream_batch_id,
    ]);
    expect(group).toEqual({ state: 'read', outcome: 'completed', lines: 1000, succeeded_count: 10, failed_count: 990 });
    expect(tasks.filter((t) => t.status === 'succeeded').map((t) => t.prompt)).toEqual(prompts.filter((p) => p.startsWith('made')));
    const refused = tasks.filter((t) => t.prompt.includes(SIMULATED_BATCH_MARKERS.refuse));
    const failedUpstream = tasks.filter((t) => t.prompt.includes(SIMULATED_BATCH_MARKERS.fail));
    expect([refused.length, failedUpstream.length]).toEqual([490, 500]);
    for (const t of refused)
      expect(t).toMatchObject({
        status: 'failed',
        error_code: 'content_refused',
        error: 'Simulated content refusal',
        attempts: 1,
        result_key: null,
      });
    for (const t of failedUpstream)
      expect(t).toMatchObject({
        status: 'failed',
        error_code: 'upstream_unavailable',
        error: 'Simulated upstream failure',
        attempts: 1,
        result_key: null,
      });
    for (const t of [...refused, ...failedUpstream]) expect(Number(t.upstream_cost_micros)).toBe(0);
    const submitted = simulatedSubmissions(dataDir);
    for (const t of tasks) expect(submitted.get(t.id)).toBe(1);

    // Exactly once: one task_refund row per failed task (expectMoneyExact), each the running balance.
    await expectMoneyExact(api, a, id, GRANTED);
    await expectRunningBalances(a);
    const [batch] = await api.db.query(`SELECT status, succeeded_count, failed_count, credits_refunded FROM batches WHERE id = $1`, [id]);
    expect(batch).toEqual({ status: 'partial', succeeded_count: 10, failed_count: 990, credits_refunded: 990 });
    expect(await eventCounts(a)).toEqual([
      { type: 'batch.completed', n: 1 },
      { type: 'task.failed', n: 990 },
      { type: 'task.succeeded', n: 10 },
    ]);
    // Each task's own telemetry, as one by one: counted by its own error code, and refunded.
    const metrics = (await gen!.get(KilnMetrics).render()).body;
    expect(metrics).toContain('kiln_economy_lines_total{model="eta-image",outcome="failed"} 990');
    expect(metrics).toMatch(/kiln_tasks_failed_total\{model="eta-image",provider="[^"]+",error_code="content_refused"\} 490\n/);
    expect(metrics).toMatch(/kiln_tasks_failed_total\{model="eta-image",provider="[^"]+",error_code="upstream_unavailable"\} 500\n/);
    expect(metrics).toContain('kiln_refunds_total{model="eta-image"} 990');
  });

  it('an upstream batch refused while it runs: its 600 tasks failed and refunded once, a chunk per transaction; tasks the window ended meanwhile are not refunded again', async () => {
    const a = await account();
    const b = await account();
    const route = simulatedBatchRoute({ maxRequests: 2500, delayMs: 600_000 });
    const [kept, expiring] = await withLargeBatches(600, async () => [
      await economyBatch(
        api,
        a,
        route,
        Array.from({ length: 600 }, (_, i) => `refused ${i}`),
      ),
      await economyBatch(
        api,
        b,
        route,
        Array.from({ length: 40 }, (_, i) => `window ${i}`),
      ),
    ]);
    gen = await bootGenerator(config);
    const upstreamId = await waitFor('the upstream batch created', async () => {
      const [row] = await api.db.query(
        `SELECT u.upstream_batch_id FROM upstream_batches u WHERE u.state = 'created' AND u.id = (SELECT upstream_batch_id FROM tasks WHERE batch_id = $1 LIMIT 1)`,
        [kept],
      );
      return row?.upstream_batch_id as string | undefined;
    });
    // The window of one batch ends first: the sweep fails and refunds its 40 tasks.
    await api.db.query(`UPDATE batches SET expires_at = now() WHERE id = $1`, [expiring]);
    await waitForBatchDone(api, expiring, 30_000);

    // The upstream loses the batch: the next poll is refused (404, not retryable).
    const writes = await failureWritesDuring(async () => {
      fs.rmSync(path.join(simulatedStateDir(dataDir), 'batches', `${upstreamId}.json`));
      await waitForBatchDone(api, kept, 30_000);
    });
    expect(writes.taskFails).toBe(3);
    expect(writes.ledgerInserts).toBe(3);

    const tasks = await taskRows(api, kept);
    for (const t of tasks)
      expect(t).toMatchObject({
        status: 'failed',
        error_code: 'upstream_unavailable',
        error: `Simulated batch API: no batch ${upstreamId}`,
      });
    for (const t of await taskRows(api, expiring))
      expect(t).toMatchObject({ status: 'failed', error_code: 'upstream_unavailable', error: ECONOMY_EXPIRED_MESSAGE });
    const [group] = await api.db.query(`SELECT state, failed_count FROM upstream_batches WHERE id = $1`, [tasks[0].upstream_batch_id]);
    expect(group).toEqual({ state: 'failed', failed_count: 600 });
    await expectMoneyExact(api, a, kept, GRANTED);
    await expectMoneyExact(api, b, expiring, GRANTED);
    await expectRunningBalances(a);
    await expectRunningBalances(b);
  });

  it('the economy window ends: tasks still waiting and tasks still upstream are failed and refunded once (upstream_unavailable)', async () => {
    const a = await account();
    // One batch never gathered (collectMs far away), one in an upstream batch that takes a minute.
    const waiting = await economyBatch(api, a, simulatedBatchRoute({ collectMs: 3_600_000, maxRequests: 1000 }), [
      'wait 1',
      'wait 2',
      'wait 3',
    ]);
    const b = await account();
    const upstream = await economyBatch(api, b, simulatedBatchRoute({ delayMs: 60_000 }), ['slow 1', 'slow 2']);
    gen = await bootGenerator(config);
    await waitFor('the slow batch created upstream', async () => {
      const tasks = await taskRows(api, upstream);
      if (!tasks.every((t) => t.status === 'running' && t.upstream_batch_id)) return false;
      const [group] = await api.db.query(`SELECT state FROM upstream_batches WHERE id = $1`, [tasks[0].upstream_batch_id]);
      return group?.state === 'created';
    });
    expect((await taskRows(api, waiting)).every((t) => t.status === 'pending')).toBe(true);
    const metrics = (await gen.get(KilnMetrics).render()).body;
    expect(metrics).toContain('kiln_economy_tasks_waiting 3');
    expect(metrics).toContain('kiln_economy_upstream_batches{state="created"} 1');
    await api.db.query(`UPDATE batches SET expires_at = now() WHERE id = ANY($1::uuid[])`, [[waiting, upstream]]);
    await waitForBatchDone(api, waiting, 30_000);
    await waitForBatchDone(api, upstream, 30_000);
    for (const [id, who] of [
      [waiting, a],
      [upstream, b],
    ] as const) {
      const tasks = await taskRows(api, id);
      for (const t of tasks)
        expect(t).toMatchObject({ status: 'failed', error_code: 'upstream_unavailable', error: ECONOMY_EXPIRED_MESSAGE });
      await expectMoneyExact(api, who, id, GRANTED);
      // The sweep's refunds are written together (BillingService.refundTasks): each row still the running balance.
      await expectRunningBalances(who);
    }
    expect((await gen.get(KilnMetrics).render()).body).toContain('kiln_economy_lines_total{model="eta-image",outcome="expired"} 5');
  });

  it('cancel mid-way: the tasks not yet in an upstream batch are cancelled and refunded, the submitted ones run on; money exact', async () => {
    const a = await account();
    // Groups of 5: the first five go at once (a full batch), the other three wait for collectMs (an hour).
    const prompts = Array.from({ length: 8 }, (_, i) => `cancel ${i}`);
    const id = await economyBatch(api, a, simulatedBatchRoute({ maxRequests: 5, collectMs: 3_600_000, delayMs: 1500 }), prompts);
    gen = await bootGenerator(config);
    await waitFor('five tasks submitted', async () => (await taskRows(api, id)).filter((t) => t.upstream_batch_id).length === 5);
    await api.http.post(`/v1/batches/${id}/cancel`).set('Authorization', bearer(a)).expect(200);
    await waitForBatchDone(api, id, 60_000);
    const tasks = await taskRows(api, id);
    expect(tasks.filter((t) => t.upstream_batch_id).every((t) => t.status === 'succeeded')).toBe(true);
    expect(tasks.filter((t) => !t.upstream_batch_id).map((t) => t.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    const [batch] = await api.db.query(`SELECT unit_cost, credits_charged, credits_refunded FROM batches WHERE id = $1`, [id]);
    expect(Number(batch.credits_refunded)).toBe(3 * batch.unit_cost);
    expect(await api.balance(a.id)).toBe(GRANTED - Number(batch.credits_charged) + 3 * batch.unit_cost);
    expect(await api.ledgerSum(a.id)).toBe(await api.balance(a.id));
    const submitted = simulatedSubmissions(dataDir);
    for (const t of tasks) expect(submitted.get(t.id) ?? 0).toBe(t.upstream_batch_id ? 1 : 0);
  });

  it('standard tasks never wait behind economy work: a standard batch created while a big economy batch waits finishes first', async () => {
    const a = await account();
    const big: string[] = [];
    for (let i = 0; i < 4; i++)
      big.push(
        await economyBatch(
          api,
          a,
          simulatedBatchRoute({ delayMs: 120_000, maxRequests: 50 }),
          Array.from({ length: 100 }, (_, j) => `patient ${i}.${j}`),
        ),
      );
    gen = await bootGenerator(config);
    await waitFor('the economy work submitted upstream', async () => {
      const [{ n }] = await api.db.query(`SELECT count(*)::int AS n FROM tasks WHERE batch_id = ANY($1::uuid[]) AND status = 'running'`, [
        big,
      ]);
      return n === 400;
    });
    const b = await account();
    const standard = await createBatch(api, b, { model: 'eta-image', prompts: ['now 1', 'now 2', 'now 3', 'now 4'] });
    await waitForBatchDone(api, standard, 30_000);
    expect((await taskRows(api, standard)).every((t) => t.status === 'succeeded' && t.tier === 'standard')).toBe(true);
    const [{ open }] = await api.db.query(
      `SELECT count(*)::int AS open FROM tasks WHERE batch_id = ANY($1::uuid[]) AND status = 'running'`,
      [big],
    );
    expect(open).toBe(400);
  });

  it("a key's daily cap counts economy charges net of refunds, and the operator's usage report equals the ledger", async () => {
    const a = await api.account({ plan: 'scale', credits: GRANTED, creditCapPerDay: 12 });
    const route = simulatedBatchRoute({ delayMs: 100 }, { cost: { '1K': 0.04, economy: { '1K': 0.02 } } });
    // 10 images at 1 credit, 4 of them failing upstream: 10 charged, 4 refunded, 6 net of the cap's 12.
    const prompts = Array.from({ length: 10 }, (_, i) => (i < 4 ? `fail ${i} ${SIMULATED_BATCH_MARKERS.fail}` : `economy ${i}`));
    const first = await economyBatch(api, a, route, prompts);
    gen = await bootGenerator(config);
    await waitForBatchDone(api, first, 60_000);
    await expectMoneyExact(api, a, first, GRANTED);
    const [done] = await api.db.query(`SELECT credits_charged, credits_refunded FROM batches WHERE id = $1`, [first]);
    expect([Number(done.credits_charged), Number(done.credits_refunded)]).toEqual([10, 4]);

    // 6 more fit (6 + 6 = 12: the refunds gave their credits back to the cap), a 7th does not.
    const second = await economyBatch(
      api,
      a,
      route,
      Array.from({ length: 6 }, (_, i) => `more ${i}`),
    );
    await waitForBatchDone(api, second, 60_000);
    await api
      .admin('patch', '/v1/admin/models/eta-image')
      .send({ provider: route, economyCreditCost: { '1K': 1 }, economyWindowHours: 24 })
      .expect(200);
    try {
      const over = await api.http
        .post('/v1/batches')
        .set('Authorization', bearer(a))
        .send({ model: 'eta-image', prompts: ['one too many'], tier: 'economy' });
      expect(over.status).toBe(402);
      expect(over.body.error.code).toBe('daily_credit_cap_exceeded');
    } finally {
      await api
        .admin('patch', '/v1/admin/models/eta-image')
        .send({ provider: { type: 'builtin' }, economyCreditCost: null })
        .expect(200);
    }

    // The usage report's money is the ledger's and its work the tasks', economy included.
    const day = new Date().toISOString().slice(0, 10);
    const [ledger] = await api.db.query(
      `SELECT COALESCE(-SUM(amount) FILTER (WHERE kind = 'batch_charge'), 0)::int AS charged,
              COALESCE(SUM(amount) FILTER (WHERE kind IN ('task_refund', 'cancel_refund')), 0)::int AS refunded
         FROM ledger_entries WHERE account_id = $1`,
      [a.id],
    );
    const [work] = await api.db.query(
      `SELECT count(*) FILTER (WHERE status = 'succeeded')::int AS images, count(*) FILTER (WHERE status = 'failed')::int AS failed,
              COALESCE(SUM(upstream_cost_micros), 0)::bigint AS micros
         FROM tasks WHERE account_id = $1`,
      [a.id],
    );
    expect([ledger.charged, ledger.refunded, work.images, work.failed, Number(work.micros)]).toEqual([16, 4, 12, 4, 12 * 20_000]);
    const report = await api.admin('get', `/v1/admin/usage?from=${day}&to=${day}&groupBy=account`).expect(200);
    const row = (report.body.rows as Record<string, number | string>[]).find((r) => r.accountId === a.id);
    expect(row).toMatchObject({ images: 12, failed: 4, creditsCharged: 16, creditsRefunded: 4, upstreamCostUsd: 0.24 });
    expect(row!.revenueUsd).toBeCloseTo(12 * 0.01, 9);
    expect(row!.marginUsd).toBeCloseTo(12 * 0.01 - 0.24, 9);
  });
});
