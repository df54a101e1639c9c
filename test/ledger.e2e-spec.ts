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
      db.transaction((m) =>
        billing.chargeBatch(m, { accountId: a.id, batchId: randomUUID(), apiKeyId: a.keyId, amount: 7 }),
      );
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
    const refund = () =>
      db.transaction((m) =>
        billing.refundTask(m, { accountId: a.id, batchId, taskId, amount: 5 }),
      );
    const results = await Promise.allSettled([refund(), refund(), refund()]);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(await t.balance(a.id)).toBe(45);
    expect(await t.ledgerSum(a.id)).toBe(45);
    expect(await billing.creditsUsedToday(a.keyId)).toBe(5);
  });
});
