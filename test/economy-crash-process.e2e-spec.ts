import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildConfig, KilnConfig } from '@app/config';
import { SIMULATED_BATCH_HANG_STEPS, SIMULATED_BATCH_MARKERS, SimulatedBatchHangStep } from '@app/providers';
import { fileEnvironment, FileEnvironment, GeneratorProcess, spawnGenerator, taskRows, TestApp, waitFor, waitForBatchDone } from '@app/testing';
import { bootApi } from './helpers/apps';
import { economyBatch, expectMoneyExact, simulatedBatchRoute, simulatedStateDir, simulatedSubmissions } from './helpers/economy';

/** Short leases so a killed generator's upstream batch is taken up within seconds. */
const CHILD_ENV = {
  GENERATOR_CONCURRENCY: '4',
  QUEUE_LOCK_DURATION_MS: '1000',
  QUEUE_STALLED_INTERVAL_MS: '500',
  RECONCILE_INTERVAL_MS: '1000',
  TASK_LEASE_MS: '3000',
  UPSTREAM_LEASE_MS: '2000',
  ECONOMY_TICK_MS: '100',
};

const GRANTED = 100_000;

jest.setTimeout(120_000);

/**
 * The built generator as a child process, SIGKILLed at each step of an upstream batch (the
 * simulated batch API hangs there: SIMULATED_BATCH_HANG_AT), then a new generator started:
 * every task was submitted upstream exactly once, none is lost, each ended once, and the
 * money is exact (spec extensions v1.2 sections 2 and 4).
 */
describe('generator process: an economy upstream batch survives SIGKILL at every step', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  const children: GeneratorProcess[] = [];
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-economy-crash-'));

  function start(extra: Record<string, string> = {}): GeneratorProcess {
    const g = spawnGenerator(config, { ...CHILD_ENV, ...extra });
    children.push(g);
    return g;
  }

  async function withOutput(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      for (const c of children) process.stderr.write(`--- generator ${c.child.pid} output ---\n${c.output().slice(-20_000)}\n`);
      throw err;
    }
  }

  beforeAll(async () => {
    const base = buildConfig(process.env);
    env = await fileEnvironment('economy_crash', { storage: { ...base.storage, dataDir } });
    config = env.config;
    api = await bootApi(config);
  });
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await api?.close();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it.each(SIMULATED_BATCH_HANG_STEPS.map((s) => [s]))('SIGKILL at %s: a new generator resumes the group; one submit per task, each ended once, money exact', (step: SimulatedBatchHangStep) =>
    withOutput(async () => {
      const a = await api.account({ plan: 'scale', credits: GRANTED });
      const prompts = [...Array.from({ length: 11 }, (_, i) => `${step} ${i}`), `${step} refused ${SIMULATED_BATCH_MARKERS.refuse}`];
      const id = await economyBatch(api, a, simulatedBatchRoute({ delayMs: 300 }), prompts);
      const first = start({ SIMULATED_BATCH_HANG_AT: step });
      const group = await waitFor(`the group of ${id}`, async () => (await taskRows(api, id))[0]?.upstream_batch_id as string | null, 30_000);
      const marker = path.join(simulatedStateDir(dataDir), 'hung', `${step}-${group}`);
      await waitFor(`the simulated batch API to hang at ${step}`, async () => fs.existsSync(marker), 30_000);
      if (step === 'mid-results') {
        // Some results already recorded when the kill comes: they must not be recorded (or paid back) again.
        await waitFor('a result recorded', async () => (await taskRows(api, id)).some((t) => t.status !== 'running'), 30_000);
      }
      first.child.kill('SIGKILL');
      expect((await first.exited).signal).toBe('SIGKILL');
      const [before] = await api.db.query(`SELECT state FROM upstream_batches WHERE id = $1`, [group]);
      const expectedState: Record<SimulatedBatchHangStep, string> = {
        'before-upload': 'collecting',
        'after-upload': 'collecting',
        'after-create': 'uploaded',
        poll: 'created',
        'mid-results': 'ended',
      };
      expect(before.state).toBe(expectedState[step]);

      const second = start();
      await waitForBatchDone(api, id, 60_000);
      second.child.kill('SIGTERM');
      expect((await second.exited).code).toBe(0);

      const tasks = await taskRows(api, id);
      expect(tasks.filter((t) => t.status === 'succeeded')).toHaveLength(11);
      expect(tasks.find((t) => t.prompt.includes(SIMULATED_BATCH_MARKERS.refuse))).toMatchObject({ status: 'failed', error_code: 'content_refused' });
      // One group, formed once: every task in it, on its one attempt.
      expect(new Set(tasks.map((t) => t.upstream_batch_id))).toEqual(new Set([group]));
      expect(tasks.every((t) => t.attempts === 1)).toBe(true);
      const submitted = simulatedSubmissions(dataDir);
      for (const t of tasks) expect(submitted.get(t.id)).toBe(1);
      const [row] = await api.db.query(`SELECT state, lines FROM upstream_batches WHERE id = $1`, [group]);
      expect(row.state).toBe('read');
      expect(row.lines).toBe(12);
      await expectMoneyExact(api, a, id, GRANTED);
    }),
  );
});
