import { TestApp, batchRow, createBatchVia, queueOf, refundRows, taskRows, waitFor, waitForBatchDone } from '@app/testing';
import { FAST_TAKEOVER_ENV, useGeneratorProcesses } from './helpers/apps';

/** Short Bull locks so a killed worker's jobs come back within about a second. */
const CHILD_ENV = {
  ...FAST_TAKEOVER_ENV,
  TASK_MAX_ATTEMPTS: '4',
  TASK_BACKOFF_MS: '50',
};

async function statusCounts(t: TestApp, batchId: string): Promise<Record<string, number>> {
  const rows: { status: string; n: number }[] = await t.db.query(
    `SELECT status, count(*)::int AS n FROM tasks WHERE batch_id = $1 GROUP BY status`,
    [batchId],
  );
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

jest.setTimeout(60_000);

describe('generator as a process: SIGKILL and SIGTERM', () => {
  const kiln = useGeneratorProcesses('gen_proc', { childEnv: CHILD_ENV });

  it(
    'killed with SIGKILL mid-batch and restarted: the batch completes and nothing is refunded twice',
    () =>
      kiln.withOutput(async () => {
        const a = await kiln.api.account({ plan: 'scale', credits: 1000 });
        const id = await createBatchVia(
          kiln.api,
          a,
          'epsilon-2-pro',
          { type: 'simulated', latencyMs: 1000, failureRate: 0.2 },
          { prompts: Array.from({ length: 30 }, (_, i) => `crash ${i}`) },
        );

        // Four at a time for a second each: once two waves have ended the third is a whole second
        // from its end, so the kill lands mid-call even on a loaded machine (with 300 ms calls and
        // every task at once, a loaded CI run read "running" and killed after they had ended).
        const first = kiln.start({ GENERATOR_CONCURRENCY: '4' });
        const atKill = await waitFor(
          'the first generator to be mid-batch',
          async () => {
            const c = await statusCounts(kiln.api, id);
            return (c.succeeded ?? 0) + (c.failed ?? 0) >= 8 && (c.running ?? 0) >= 2 ? c : null;
          },
          30_000,
          20,
        );
        expect((await kiln.kill(first, 'SIGKILL')).signal).toBe('SIGKILL');
        expect(atKill.running).toBeGreaterThanOrEqual(2);

        const second = kiln.start();
        await waitForBatchDone(kiln.api, id, 45_000);
        expect((await kiln.kill(second, 'SIGTERM')).code).toBe(0);

        const tasks = await taskRows(kiln.api, id);
        const failed = tasks.filter((t) => t.status === 'failed');
        expect(tasks.every((t) => t.status === 'succeeded' || t.status === 'failed')).toBe(true);
        // The tasks the kill interrupted were taken over by the second generator.
        expect(tasks.some((t) => t.attempts >= 2)).toBe(true);
        expect(tasks.filter((t) => t.status === 'succeeded').every((t) => t.result_url && t.progress === 100)).toBe(true);

        const refunds = await refundRows(kiln.api, id);
        expect(refunds).toHaveLength(failed.length);
        expect(new Set(refunds.map((r) => r.task_id)).size).toBe(failed.length);
        expect(new Set(refunds.map((r) => r.task_id))).toEqual(new Set(failed.map((t) => t.id)));
        const batch = await batchRow(kiln.api, id);
        expect(batch).toMatchObject({
          succeeded_count: 30 - failed.length,
          failed_count: failed.length,
          credits_refunded: 5 * failed.length,
          status: failed.length === 0 ? 'succeeded' : failed.length === 30 ? 'failed' : 'partial',
        });
        expect(batch.finished_at).not.toBeNull();
        expect(await kiln.api.balance(a.id)).toBe(1000 - 150 + 5 * failed.length);
        expect(await kiln.api.ledgerSum(a.id)).toBe(await kiln.api.balance(a.id));
      }),
    90_000,
  );

  it(
    'SIGTERM drains: in-flight tasks finish, the process exits 0 within the grace period, nothing is left running',
    () =>
      kiln.withOutput(async () => {
        const a = await kiln.api.account({ credits: 1000 });
        const id = await createBatchVia(
          kiln.api,
          a,
          'epsilon-2-pro',
          { type: 'simulated', latencyMs: 1500 },
          { prompts: Array.from({ length: 8 }, (_, i) => `drain ${i}`) },
        );
        const g = kiln.start({ GENERATOR_CONCURRENCY: '3', SHUTDOWN_GRACE_MS: '10000' });
        const running = await waitFor(
          'three tasks in flight',
          async () => {
            const rows = (await taskRows(kiln.api, id)).filter((t) => t.status === 'running');
            return rows.length === 3 ? rows : null;
          },
          30_000,
          20,
        );
        const sentAt = Date.now();
        const exit = await kiln.kill(g, 'SIGTERM');
        expect(exit).toMatchObject({ code: 0, signal: null });
        expect(exit.at - sentAt).toBeLessThan(10_000);

        const tasks = await taskRows(kiln.api, id);
        expect(tasks.filter((t) => t.status === 'running')).toEqual([]);
        for (const r of running) expect(tasks.find((t) => t.id === r.id)).toMatchObject({ status: 'succeeded', progress: 100 });
        // Nothing new was started after the signal: the rest still wait in the queue.
        expect(tasks.filter((t) => t.status === 'queued').length).toBe(8 - tasks.filter((t) => t.status === 'succeeded').length);
      }),
    60_000,
  );

  it(
    'SIGTERM past the grace period: renders are interrupted and their tasks go back to the queue',
    () =>
      kiln.withOutput(async () => {
        const a = await kiln.api.account({ credits: 1000 });
        const id = await createBatchVia(
          kiln.api,
          a,
          'epsilon-2-pro',
          { type: 'simulated', latencyMs: 20_000 },
          { prompts: ['slow 1', 'slow 2'] },
        );
        const g = kiln.start({ GENERATOR_CONCURRENCY: '2', SHUTDOWN_GRACE_MS: '1000' });
        await waitFor('both tasks in flight', async () => (await statusCounts(kiln.api, id)).running === 2, 30_000, 20);
        const sentAt = Date.now();
        const exit = await kiln.kill(g, 'SIGTERM');
        expect(exit.code).toBe(0);
        expect(exit.at - sentAt).toBeLessThan(6000);

        const tasks = await taskRows(kiln.api, id);
        expect(tasks.map((t) => [t.status, t.attempts, t.progress])).toEqual([
          ['queued', 1, 0],
          ['queued', 1, 0],
        ]);
        // Each has a job for its next attempt, ready for the next generator.
        const queue = queueOf(kiln.api.app);
        for (const t of tasks) expect(await (await queue.getJob(`${t.id}-attempt2`))?.getState()).toBe('waiting');
        expect(await refundRows(kiln.api, id)).toHaveLength(0);
      }),
    60_000,
  );
});
