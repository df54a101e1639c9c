import { batchRow, createBatchVia, refundRows, taskRows, waitFor, waitForBatchDone } from '@app/testing';
import { useGeneratorProcesses } from './helpers/apps';

jest.setTimeout(120_000);

const CHILD_ENV = {
  GENERATOR_CONCURRENCY: '6',
  QUEUE_LOCK_DURATION_MS: '3000',
  QUEUE_STALLED_INTERVAL_MS: '30000',
  RECONCILE_INTERVAL_MS: '1000',
  TASK_LEASE_MS: '2000',
  TASK_MAX_ATTEMPTS: '4',
  TASK_BACKOFF_MS: '50',
};

/**
 * A batch's deadline passing while its generator is SIGKILLed mid-batch: the tasks it had
 * sent run again on the next generator (they had started), the ones it had not are cancelled
 * and refunded by the next generator's deadline sweep; every task ends once, and money is exact.
 */
describe('deadline racing a generator SIGKILL', () => {
  const kiln = useGeneratorProcesses('deadline_kill', { childEnv: CHILD_ENV });

  it('leaves money exact: sent tasks finish, unsent ones are cancelled and refunded once', () =>
    kiln.withOutput(async () => {
      const { api } = kiln;
      const a = await api.account({ plan: 'scale', credits: 1000 });
      const route = { type: 'simulated' as const, latencyMs: 1500, failureRate: 0.1 };
      // A first batch, so the generator is known to be consuming before the deadline's clock starts.
      const first = kiln.start();
      const warm = await createBatchVia(api, a, 'epsilon-2-pro', { type: 'simulated', latencyMs: 10 }, { prompts: ['warm'] });
      await waitForBatchDone(api, warm, 60_000);

      const deadline = Date.now() + 2500;
      const id = await createBatchVia(api, a, 'epsilon-2-pro', route, {
        prompts: Array.from({ length: 30 }, (_, i) => `deadline ${i}`),
        deadline,
      });
      await waitFor('the deadline', () => Date.now() >= deadline, 10_000, 10);
      await kiln.kill(first, 'SIGKILL');
      const atKill = await taskRows(api, id);
      expect(atKill.filter((t) => t.status === 'running').length).toBeGreaterThanOrEqual(1);

      kiln.start();
      await waitForBatchDone(api, id, 90_000);
      const tasks = await taskRows(api, id);
      const by = (s: string) => tasks.filter((t) => t.status === s);
      expect(by('succeeded').length + by('failed').length + by('cancelled').length).toBe(30);
      expect(by('cancelled').length).toBeGreaterThanOrEqual(1);
      expect(by('succeeded').length).toBeGreaterThanOrEqual(1);
      expect(by('cancelled').every((t) => t.sent_at === null)).toBe(true);
      // What the killed generator had sent had started: taken over, it ran on, never cancelled.
      const sentAtKill = new Set(atKill.filter((t) => t.status === 'running' && t.sent_at).map((t) => t.id));
      expect(tasks.filter((t) => sentAtKill.has(t.id) && t.status === 'cancelled')).toEqual([]);

      const warmCost = (await batchRow(api, warm)).credits_charged as number;
      const batch = await batchRow(api, id);
      const unit = batch.unit_cost as number;
      const refunds = await refundRows(api, id);
      expect(new Set(refunds.map((r) => r.task_id))).toEqual(new Set(by('failed').map((t) => t.id)));
      expect(refunds).toHaveLength(by('failed').length);
      const [cancelRefund] = await api.db.query(
        `SELECT COALESCE(sum(amount), 0)::int AS n, count(*)::int AS rows FROM ledger_entries WHERE batch_id = $1 AND kind = 'cancel_refund'`,
        [id],
      );
      expect(cancelRefund.n).toBe(by('cancelled').length * unit);
      expect(batch).toMatchObject({
        cancel_reason: 'deadline',
        cancelled_count: by('cancelled').length,
        succeeded_count: by('succeeded').length,
        failed_count: by('failed').length,
        credits_refunded: (by('failed').length + by('cancelled').length) * unit,
      });
      const spent = warmCost + by('succeeded').length * unit;
      expect(await api.balance(a.id)).toBe(1000 - spent);
      expect(await api.ledgerSum(a.id)).toBe(1000 - spent);
    }));
});
