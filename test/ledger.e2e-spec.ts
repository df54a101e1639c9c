import { DataSource } from 'typeorm';
import { ApiModule } from '../apps/api/src/api.module';
import { configureApp } from '../apps/api/src/app.setup';
import { bootTestApp, TestApp } from '@app/testing';
import { BillingService } from '@app/billing';
import { KilnError } from '@app/errors';
import { randomUUID } from 'node:crypto';

describe('credit ledger invariant under concurrency', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await bootTestApp(ApiModule, configureApp);
  });
  afterAll(() => t.close());

  it('concurrent grants, adjustments and charges never overdraw, and balance == sum(ledger)', async () => {
    const a = await t.account({ credits: 100 });
    const billing = t.app.get(BillingService);
    const db = t.app.get(DataSource);
    // 40 charges of 7 race 10 grants of 5 and 10 adjustments of -3; whatever the interleaving,
    // no charge may take the balance below zero.
    const charge = () =>
      db.transaction((m) => billing.chargeBatch(m, { accountId: a.id, batchId: randomUUID(), apiKeyId: a.keyId, amount: 7 }));
    const ops: Array<Promise<unknown>> = [];
    for (let i = 0; i < 40; i++) ops.push(charge());
    for (let i = 0; i < 10; i++) ops.push(billing.adjust(a.id, 5, 'grant', 'race'));
    for (let i = 0; i < 10; i++) ops.push(billing.adjust(a.id, -3, 'adjustment', 'race'));
    const results = await Promise.allSettled(ops);
    for (const r of results) {
      if (r.status === 'rejected') {
        expect(r.reason).toBeInstanceOf(KilnError);
        expect(['insufficient_credits', 'invalid_request']).toContain(r.reason.code);
      }
    }
    const balance = await t.balance(a.id);
    expect(balance).toBeGreaterThanOrEqual(0);
    expect(await t.ledgerSum(a.id)).toBe(balance);
    const charges = results.slice(0, 40).filter((r) => r.status === 'fulfilled').length;
    const grants = results.slice(40, 50).filter((r) => r.status === 'fulfilled').length;
    const adjustments = results.slice(50).filter((r) => r.status === 'fulfilled').length;
    expect(balance).toBe(100 - 7 * charges + 5 * grants - 3 * adjustments);
    // Every ledger row's balance_after is the running sum in commit order.
    const rows = await db.query(`SELECT amount, balance_after FROM ledger_entries WHERE account_id = $1 ORDER BY id`, [a.id]);
    let running = 0;
    for (const r of rows) {
      running += Number(r.amount);
      expect(Number(r.balance_after)).toBeGreaterThanOrEqual(0);
    }
    expect(running).toBe(balance);
  });

  it('a task is refunded at most once, even when two refunds race', async () => {
    const a = await t.account({ credits: 50 });
    const billing = t.app.get(BillingService);
    const db = t.app.get(DataSource);
    const batchId = randomUUID();
    await db.transaction((m) => billing.chargeBatch(m, { accountId: a.id, batchId, apiKeyId: a.keyId, amount: 10 }));
    const taskId = randomUUID();
    const refund = () => db.transaction((m) => billing.refundTask(m, { accountId: a.id, batchId, taskId, amount: 5 }));
    const results = await Promise.allSettled([refund(), refund(), refund()]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(await t.balance(a.id)).toBe(45);
    expect(await t.ledgerSum(a.id)).toBe(45);
    expect(await billing.creditsUsedToday(a.keyId)).toBe(5);
  });

  it('refundTasks: one row per task with the running balance and the charge key, a task already refunded skipped; racing calls refund each task once', async () => {
    const a = await t.account({ credits: 100 });
    const b = await t.account({ credits: 100 });
    const billing = t.app.get(BillingService);
    const db = t.app.get(DataSource);
    const [batchA, batchB] = [randomUUID(), randomUUID()];
    await db.transaction((m) => billing.chargeBatch(m, { accountId: a.id, batchId: batchA, apiKeyId: a.keyId, amount: 40 }));
    await db.transaction((m) => billing.chargeBatch(m, { accountId: b.id, batchId: batchB, apiKeyId: b.keyId, amount: 40 }));
    const tasksA = Array.from({ length: 6 }, () => randomUUID());
    const tasksB = Array.from({ length: 4 }, () => randomUUID());
    // One of a's tasks was refunded already (by the single path).
    await db.transaction((m) => billing.refundTask(m, { accountId: a.id, batchId: batchA, taskId: tasksA[0], amount: 3 }));
    const refunds = [
      ...tasksA.map((taskId) => ({ accountId: a.id, batchId: batchA, taskId, amount: 3 })),
      ...tasksB.map((taskId) => ({ accountId: b.id, batchId: batchB, taskId, amount: 2 })),
    ];
    // Interleaved accounts, in two calls at once: a task already refunded is skipped, never paid twice.
    const interleaved = [...refunds].sort((x, y) => x.taskId.localeCompare(y.taskId));
    const results = await Promise.allSettled([
      db.transaction((m) => billing.refundTasks(m, interleaved)),
      db.transaction((m) => billing.refundTasks(m, [...interleaved].reverse())),
    ]);
    const paid = results.filter((r): r is PromiseFulfilledResult<Set<string>> => r.status === 'fulfilled').map((r) => r.value);
    expect(paid.length).toBeGreaterThanOrEqual(1);
    expect(paid.reduce((n, s) => n + s.size, 0)).toBe(9);
    expect(await t.balance(a.id)).toBe(100 - 40 + 6 * 3);
    expect(await t.balance(b.id)).toBe(100 - 40 + 4 * 2);
    for (const who of [a, b]) {
      expect(await t.ledgerSum(who.id)).toBe(await t.balance(who.id));
      const rows = await db.query(`SELECT amount, balance_after FROM ledger_entries WHERE account_id = $1 ORDER BY id`, [who.id]);
      let running = 0;
      for (const r of rows) {
        running += Number(r.amount);
        expect(Number(r.balance_after)).toBe(running);
      }
    }
    const rows: { task_id: string; api_key_id: string; charge_day: string; reason: string }[] = await db.query(
      `SELECT task_id, api_key_id, charge_day::text AS charge_day, reason FROM ledger_entries WHERE kind = 'task_refund' AND batch_id = ANY($1::uuid[])`,
      [[batchA, batchB]],
    );
    expect(rows).toHaveLength(10);
    expect(new Set(rows.map((r) => r.task_id)).size).toBe(10);
    for (const r of rows)
      expect(r).toMatchObject({
        api_key_id: (tasksA as string[]).includes(r.task_id) ? a.keyId : b.keyId,
        charge_day: new Date().toISOString().slice(0, 10),
        reason: 'Refund for a failed task',
      });
    expect(await billing.creditsUsedToday(a.keyId)).toBe(40 - 18);
  });
});
