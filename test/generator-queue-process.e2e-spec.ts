import { ProviderRoute } from '@app/database';
import {
  FakeQueueUpstream,
  fakeQueueUpstream,
  QueueTypeName,
  batchRow,
  createBatchVia,
  refundRows,
  taskRows,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { QUEUE_CHILD_ENV, useGeneratorProcesses } from './helpers/apps';

const MODEL: Record<QueueTypeName, string> = {
  fal: 'fal-ai/flux/schnell',
  replicate: 'black-forest-labs/flux-schnell',
  bfl: 'flux-pro-1.1',
};

jest.setTimeout(120_000);

/**
 * The built generator as a child process against fake queue upstreams: killed after the
 * submits, a new generator resumes every request, and the upstream saw exactly one submit
 * per task (spec extensions v1.2 section 2: never pay an upstream twice).
 */
describe('generator process: queue upstreams survive SIGKILL and SIGTERM without paying twice', () => {
  const kiln = useGeneratorProcesses('gen_queue_proc', {
    childEnv: QUEUE_CHILD_ENV,
    overrides: (base) => ({ upstream: { ...base.upstream, allowPrivate: true } }),
  });

  async function batchOn(fake: FakeQueueUpstream, dialect: QueueTypeName, prompts: string[]): Promise<string> {
    const a = await kiln.api.account({ plan: 'scale', credits: 10_000 });
    const route = { preset: `${dialect}/${MODEL[dialect]}`, baseUrl: fake.baseUrl, pollIntervalMs: 200 } as unknown as ProviderRoute;
    return createBatchVia(kiln.api, a, 'eta-image', route, { prompts });
  }

  async function allRecorded(batchId: string, n: number): Promise<void> {
    await waitFor(
      `${n} upstream requests recorded`,
      async () => (await taskRows(kiln.api, batchId)).filter((t) => t.upstream_request_id).length === n,
      60_000,
      20,
    );
  }

  it.each(['fal', 'replicate', 'bfl'] as const)(
    '%s: SIGKILL after the submits, a new generator resumes each request; one submit per task',
    (dialect) =>
      kiln.withOutput(async () => {
        const fake = fakeQueueUpstream(dialect, { queueMs: 5000, imageSize: { width: 64, height: 64 } });
        await fake.start();
        try {
          const prompts = Array.from({ length: 20 }, (_, i) => `${dialect} crash ${i}`);
          const id = await batchOn(fake, dialect, prompts);
          const first = kiln.start();
          await allRecorded(id, 20);
          expect((await kiln.kill(first, 'SIGKILL')).signal).toBe('SIGKILL');
          expect((await taskRows(kiln.api, id)).every((t) => t.status === 'running')).toBe(true);

          const second = kiln.start();
          await waitForBatchDone(kiln.api, id, 60_000);
          expect((await kiln.kill(second, 'SIGTERM')).code).toBe(0);

          const tasks = await taskRows(kiln.api, id);
          expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
          // A job still active in Bull when the kill came is delivered again (a second claim):
          // that claim resumes the recorded request, it does not submit it again.
          expect(tasks.every((t) => t.attempts <= 2 && t.result_url)).toBe(true);
          for (const p of prompts) expect(fake.submitsFor(p)).toBe(1);
          expect(fake.submits).toBe(20);
          expect(await refundRows(kiln.api, id)).toHaveLength(0);
          expect(await batchRow(kiln.api, id)).toMatchObject({ status: 'succeeded', succeeded_count: 20 });
        } finally {
          await fake.stop();
        }
      }),
  );

  it('SIGTERM while requests wait upstream: exits 0 within the grace period, the waiting tasks given back, the next generator resumes them', () =>
    kiln.withOutput(async () => {
      const fake = fakeQueueUpstream('fal', { queueMs: 6000, imageSize: { width: 64, height: 64 } });
      await fake.start();
      try {
        const prompts = Array.from({ length: 12 }, (_, i) => `drain ${i}`);
        const id = await batchOn(fake, 'fal', prompts);
        const g = kiln.start({ SHUTDOWN_GRACE_MS: '3000', UPSTREAM_LEASE_MS: '60000' });
        await allRecorded(id, 12);
        const sentAt = Date.now();
        const exit = await kiln.kill(g, 'SIGTERM');
        expect(exit.code).toBe(0);
        expect(exit.at - sentAt).toBeLessThan(3000 + 2000);
        // Given back, not left to a lease of a minute: still waiting upstream, held by nobody.
        const waiting = await taskRows(kiln.api, id);
        expect(waiting.every((t) => t.status === 'running' && t.upstream_poll_at && t.upstream_poller === null)).toBe(true);

        const next = kiln.start({ UPSTREAM_LEASE_MS: '60000' });
        await waitForBatchDone(kiln.api, id, 60_000);
        await kiln.kill(next, 'SIGTERM');
        expect((await taskRows(kiln.api, id)).map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
        expect(fake.submits).toBe(12);
      } finally {
        await fake.stop();
      }
    }));
});
