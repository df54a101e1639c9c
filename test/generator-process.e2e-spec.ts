import { KilnConfig } from '@app/config';
import { TestApp, batchRow, createBatch, fileEnvironment, FileEnvironment, GeneratorProcess, queueOf, refundRows, routeModel, spawnGenerator, taskRows, waitFor, waitForBatchDone } from '@app/testing';
import { bootApi } from './helpers/apps';

/** Short Bull locks so a killed worker's jobs come back within about a second. */
const CHILD_ENV = {
  GENERATOR_CONCURRENCY: '4',
  QUEUE_LOCK_DURATION_MS: '1000',
  QUEUE_STALLED_INTERVAL_MS: '500',
  RECONCILE_INTERVAL_MS: '1000',
  TASK_LEASE_MS: '3000',
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
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  const children: GeneratorProcess[] = [];

  function start(env: Record<string, string> = {}): GeneratorProcess {
    const g = spawnGenerator(config, { ...CHILD_ENV, ...env });
    children.push(g);
    return g;
  }

  /** Runs `fn`, printing the children's output if it fails. */
  async function withOutput(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      for (const c of children) process.stderr.write(`--- generator ${c.child.pid} output ---\n${c.output()}\n`);
      throw err;
    }
  }

  beforeAll(async () => {
    env = await fileEnvironment('gen_proc');
    config = env.config;
    api = await bootApi(config);
  });
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await api?.close();
    await env?.teardown();
  });

  it('killed with SIGKILL mid-batch and restarted: the batch completes and nothing is refunded twice', () =>
    withOutput(async () => {
      const a = await api.account({ plan: 'scale', credits: 1000 });
      const restore = await routeModel(api, 'epsilon-2-pro', { type: 'simulated', latencyMs: 300, failureRate: 0.2 });
      let id: string;
      try {
        id = await createBatch(api, a, { model: 'epsilon-2-pro', prompts: Array.from({ length: 30 }, (_, i) => `crash ${i}`) });
      } finally {
        await restore();
      }

      const first = start();
      const atKill = await waitFor(
        'the first generator to be mid-batch',
        async () => {
          const c = await statusCounts(api, id);
          return (c.succeeded ?? 0) + (c.failed ?? 0) >= 6 && (c.running ?? 0) >= 2 ? c : null;
        },
        30_000,
        20,
      );
      first.child.kill('SIGKILL');
      expect((await first.exited).signal).toBe('SIGKILL');
      expect(atKill.running).toBeGreaterThanOrEqual(2);

      const second = start();
      await waitForBatchDone(api, id, 45_000);
      second.child.kill('SIGTERM');
      expect((await second.exited).code).toBe(0);

      const tasks = await taskRows(api, id);
      const failed = tasks.filter((t) => t.status === 'failed');
      expect(tasks.every((t) => t.status === 'succeeded' || t.status === 'failed')).toBe(true);
      // The tasks the kill interrupted were taken over by the second generator.
      expect(tasks.some((t) => t.attempts >= 2)).toBe(true);
      expect(tasks.filter((t) => t.status === 'succeeded').every((t) => t.result_url && t.progress === 100)).toBe(true);

      const refunds = await refundRows(api, id);
      expect(refunds).toHaveLength(failed.length);
      expect(new Set(refunds.map((r) => r.task_id)).size).toBe(failed.length);
      expect(new Set(refunds.map((r) => r.task_id))).toEqual(new Set(failed.map((t) => t.id)));
      const batch = await batchRow(api, id);
      expect(batch).toMatchObject({
        succeeded_count: 30 - failed.length,
        failed_count: failed.length,
        credits_refunded: 5 * failed.length,
        status: failed.length === 0 ? 'succeeded' : failed.length === 30 ? 'failed' : 'partial',
      });
      expect(batch.finished_at).not.toBeNull();
      expect(await api.balance(a.id)).toBe(1000 - 150 + 5 * failed.length);
      expect(await api.ledgerSum(a.id)).toBe(await api.balance(a.id));
    }), 90_000);

  it('SIGTERM drains: in-flight tasks finish, the process exits 0 within the grace period, nothing is left running', () =>
    withOutput(async () => {
      const a = await api.account({ credits: 1000 });
      const restore = await routeModel(api, 'epsilon-2-pro', { type: 'simulated', latencyMs: 1500 });
      let id: string;
      try {
        id = await createBatch(api, a, { model: 'epsilon-2-pro', prompts: Array.from({ length: 8 }, (_, i) => `drain ${i}`) });
      } finally {
        await restore();
      }
      const g = start({ GENERATOR_CONCURRENCY: '3', SHUTDOWN_GRACE_MS: '10000' });
      const running = await waitFor(
        'three tasks in flight',
        async () => {
          const rows = (await taskRows(api, id)).filter((t) => t.status === 'running');
          return rows.length === 3 ? rows : null;
        },
        30_000,
        20,
      );
      const sentAt = Date.now();
      g.child.kill('SIGTERM');
      const exit = await g.exited;
      expect(exit).toMatchObject({ code: 0, signal: null });
      expect(exit.at - sentAt).toBeLessThan(10_000);

      const tasks = await taskRows(api, id);
      expect(tasks.filter((t) => t.status === 'running')).toEqual([]);
      for (const r of running) expect(tasks.find((t) => t.id === r.id)).toMatchObject({ status: 'succeeded', progress: 100 });
      // Nothing new was started after the signal: the rest still wait in the queue.
      expect(tasks.filter((t) => t.status === 'queued').length).toBe(8 - tasks.filter((t) => t.status === 'succeeded').length);
    }), 60_000);

  it('SIGTERM past the grace period: renders are interrupted and their tasks go back to the queue', () =>
    withOutput(async () => {
      const a = await api.account({ credits: 1000 });
      const restore = await routeModel(api, 'epsilon-2-pro', { type: 'simulated', latencyMs: 20_000 });
      let id: string;
      try {
        id = await createBatch(api, a, { model: 'epsilon-2-pro', prompts: ['slow 1', 'slow 2'] });
      } finally {
        await restore();
      }
      const g = start({ GENERATOR_CONCURRENCY: '2', SHUTDOWN_GRACE_MS: '1000' });
      await waitFor('both tasks in flight', async () => (await statusCounts(api, id)).running === 2, 30_000, 20);
      const sentAt = Date.now();
      g.child.kill('SIGTERM');
      const exit = await g.exited;
      expect(exit.code).toBe(0);
      expect(exit.at - sentAt).toBeLessThan(6000);

      const tasks = await taskRows(api, id);
      expect(tasks.map((t) => [t.status, t.attempts, t.progress])).toEqual([
        ['queued', 1, 0],
        ['queued', 1, 0],
      ]);
      // Each has a job for its next attempt, ready for the next generator.
      const queue = queueOf(api.app);
      for (const t of tasks) expect(await (await queue.getJob(`${t.id}-attempt2`))?.getState()).toBe('waiting');
      expect(await refundRows(api, id)).toHaveLength(0);
    }), 60_000);
});
