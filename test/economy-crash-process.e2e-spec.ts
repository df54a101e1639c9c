import * as fs from 'node:fs';
import * as path from 'node:path';
import { SIMULATED_BATCH_HANG_STEPS, SIMULATED_BATCH_MARKERS, SimulatedBatchHangStep } from '@app/providers';
import { taskRows, waitFor, waitForBatchDone } from '@app/testing';
import { FAST_TAKEOVER_ENV, useGeneratorProcesses } from './helpers/apps';
import { economyBatch, expectMoneyExact, simulatedBatchRoute, simulatedStateDir, simulatedSubmissions } from './helpers/economy';

/** Short leases so a killed generator's upstream batch is taken up within seconds. */
const CHILD_ENV = {
  ...FAST_TAKEOVER_ENV,
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
  // Its own data directory: the simulated batch API's state there is this file's alone.
  const kiln = useGeneratorProcesses('economy_crash', { childEnv: CHILD_ENV, ownDataDir: true });

  it.each(SIMULATED_BATCH_HANG_STEPS.map((s) => [s]))(
    'SIGKILL at %s: a new generator resumes the group; one submit per task, each ended once, money exact',
    (step: SimulatedBatchHangStep) =>
      kiln.withOutput(async () => {
        const a = await kiln.api.account({ plan: 'scale', credits: GRANTED });
        const prompts = [...Array.from({ length: 11 }, (_, i) => `${step} ${i}`), `${step} refused ${SIMULATED_BATCH_MARKERS.refuse}`];
        const id = await economyBatch(kiln.api, a, simulatedBatchRoute({ delayMs: 300 }), prompts);
        const first = kiln.start({ SIMULATED_BATCH_HANG_AT: step });
        const group = await waitFor(
          `the group of ${id}`,
          async () => (await taskRows(kiln.api, id))[0]?.upstream_batch_id as string | null,
          30_000,
        );
        const marker = path.join(simulatedStateDir(kiln.dataDir), 'hung', `${step}-${group}`);
        await waitFor(`the simulated batch API to hang at ${step}`, () => fs.existsSync(marker), 30_000);
        if (step === 'mid-results') {
          // Some results already recorded when the kill comes: they must not be recorded (or paid back) again.
          await waitFor('a result recorded', async () => (await taskRows(kiln.api, id)).some((t) => t.status !== 'running'), 30_000);
        }
        expect((await kiln.kill(first, 'SIGKILL')).signal).toBe('SIGKILL');
        const [before] = await kiln.api.db.query(`SELECT state FROM upstream_batches WHERE id = $1`, [group]);
        const expectedState: Record<SimulatedBatchHangStep, string> = {
          'before-upload': 'collecting',
          'after-upload': 'collecting',
          'after-create': 'uploaded',
          poll: 'created',
          'mid-results': 'ended',
        };
        expect(before.state).toBe(expectedState[step]);

        const second = kiln.start();
        await waitForBatchDone(kiln.api, id, 60_000);
        expect((await kiln.kill(second, 'SIGTERM')).code).toBe(0);

        const tasks = await taskRows(kiln.api, id);
        expect(tasks.filter((t) => t.status === 'succeeded')).toHaveLength(11);
        expect(tasks.find((t) => t.prompt.includes(SIMULATED_BATCH_MARKERS.refuse))).toMatchObject({
          status: 'failed',
          error_code: 'content_refused',
        });
        // One group, formed once: every task in it, on its one attempt.
        expect(new Set(tasks.map((t) => t.upstream_batch_id))).toEqual(new Set([group]));
        expect(tasks.every((t) => t.attempts === 1)).toBe(true);
        const submitted = simulatedSubmissions(kiln.dataDir);
        for (const t of tasks) expect(submitted.get(t.id)).toBe(1);
        const [row] = await kiln.api.db.query(`SELECT state, lines FROM upstream_batches WHERE id = $1`, [group]);
        expect(row.state).toBe('read');
        expect(row.lines).toBe(12);
        await expectMoneyExact(kiln.api, a, id, GRANTED);
      }),
  );
});
