import { ProviderRoute } from '@app/database';
import { createBatch, fakeQueueUpstream, refundRows, taskRows, waitFor, waitForBatchDone } from '@app/testing';
import { QUEUE_CHILD_ENV, useGeneratorProcesses } from './helpers/apps';

jest.setTimeout(120_000);

/**
 * Never pay twice across routes, with the built generator SIGKILLed: a chain of two fal
 * routes whose first runs every request and fails it (a 5xx run, which fal does not bill);
 * the generator is killed while tasks move from the first to the second, a new one finishes
 * the batch. Each task was submitted once per route, and to the second only after the first
 * had failed its request (never while it could still run).
 */
describe('generator process: failover from a failing queue route survives SIGKILL without paying twice', () => {
  const kiln = useGeneratorProcesses('failover_queue_proc', {
    childEnv: QUEUE_CHILD_ENV,
    overrides: (base) => ({ upstream: { ...base.upstream, allowPrivate: true } }),
  });

  it('SIGKILL while tasks move to the second route: one submit per task per route, the second only after the first failed', () =>
    kiln.withOutput(async () => {
      const failing = fakeQueueUpstream('fal', { queueMs: 1500, failAll: true, imageSize: { width: 64, height: 64 } });
      const healthy = fakeQueueUpstream('fal', { queueMs: 1500, imageSize: { width: 64, height: 64 } });
      await failing.start();
      await healthy.start();
      try {
        const route = (fake: typeof failing) =>
          ({ preset: 'fal/fal-ai/flux/schnell', baseUrl: fake.baseUrl, pollIntervalMs: 200 }) as unknown as ProviderRoute;
        // The generator reports its keys first: the api refuses a route whose key a live generator lacks.
        const first = kiln.start();
        await kiln.api
          .admin('patch', '/v1/admin/models/eta-image')
          .send({ routes: [route(failing), route(healthy)], failover: { failuresToOpen: 100 } })
          .expect(200);
        const a = await kiln.api.account({ plan: 'scale', credits: 10_000 });
        const prompts = Array.from({ length: 12 }, (_, i) => `failover crash ${i}`);
        const id = await createBatch(kiln.api, a, { model: 'eta-image', prompts });
        await waitFor(
          'a task moved to the second route',
          async () => (await taskRows(kiln.api, id)).some((t) => (t as unknown as { route_index: number }).route_index === 1),
          60_000,
          20,
        );
        expect((await kiln.kill(first, 'SIGKILL')).signal).toBe('SIGKILL');

        const second = kiln.start();
        await waitForBatchDone(kiln.api, id, 60_000);
        expect((await kiln.kill(second, 'SIGTERM')).code).toBe(0);

        const tasks = await taskRows(kiln.api, id);
        expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
        expect(tasks.every((t) => (t as unknown as { route_index: number }).route_index === 1)).toBe(true);
        for (const p of prompts) {
          expect(failing.submitsFor(p)).toBe(1);
          expect(healthy.submitsFor(p)).toBe(1);
          // Sent to the second route only once the first had run and failed its request.
          const [failed] = failing.madeFor(p);
          const [made] = healthy.madeFor(p);
          expect(made.submittedAt).toBeGreaterThanOrEqual(failed.readyAt);
        }
        expect(await refundRows(kiln.api, id)).toHaveLength(0);
      } finally {
        await failing.stop();
        await healthy.stop();
      }
    }));
});
