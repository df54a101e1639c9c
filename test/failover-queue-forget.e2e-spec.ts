import { TestingModule } from '@nestjs/testing';
import { buildConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import { TaskReconcilerService } from '@app/generation';
import { UpstreamWaitStore } from '@app/tasks';
import {
  createBatch,
  FakeQueueUpstream,
  fakeQueueUpstream,
  fileEnvironment,
  FileEnvironment,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(90_000);

type RouteRow = { status: string; attempts: number; route_index: number; upstream_request_id: string | null };

/**
 * A chain of two fal routes whose first fails every request (a 5xx run, not billed): the
 * failed request is forgotten and the task moved to the second route in one write, so a crash
 * right after it (here: the forget throws once written, as a SIGKILL would stop the run there) leaves the
 * task on the second route, and its next attempt never submits to the failing route again.
 * As two writes, the crash window between them gave the failing route a second submit (the
 * CI's failover-queue-process, one task in twelve).
 */
describe('failover from a queue route: the failed request forgotten and the move in one write', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  let failing: FakeQueueUpstream;
  let healthy: FakeQueueUpstream;

  beforeAll(async () => {
    failing = fakeQueueUpstream('fal', { queueMs: 300, failAll: true, imageSize: { width: 64, height: 64 } });
    healthy = fakeQueueUpstream('fal', { queueMs: 300, imageSize: { width: 64, height: 64 } });
    await failing.start();
    await healthy.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('failover_queue_forget', {
      upstream: { ...base.upstream, allowPrivate: true },
      providerApiKeys: { FAL_KEY: 'fal-test-key:secret' },
      // Passes by hand (reconcileOnce); a crashed run's task is the reconciler's after a second.
      generator: { concurrency: 2, maxAttempts: 3, backoffMs: 20, reconcileIntervalMs: 600_000, taskLeaseMs: 1000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 10_000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await failing?.stop();
    await healthy?.stop();
    await env?.teardown();
  });

  it('a crash right after the failed request is recorded leaves the task on the next route: one submit per route', async () => {
    const route = (fake: FakeQueueUpstream) =>
      ({ preset: 'fal/fal-ai/flux/schnell', baseUrl: fake.baseUrl, pollIntervalMs: 100 }) as unknown as ProviderRoute;
    await api
      .admin('patch', '/v1/admin/models/eta-image')
      .send({ routes: [route(failing), route(healthy)], failover: { failuresToOpen: 100 } })
      .expect(200);

    // The run stops right after the poller's failure is written: what a SIGKILL there leaves.
    const waits = gen.get(UpstreamWaitStore);
    const forget = waits.forget.bind(waits);
    const crashed = jest.spyOn(waits, 'forget').mockImplementationOnce(async (...args: Parameters<UpstreamWaitStore['forget']>) => {
      await forget(...args);
      throw new Error('killed right after the forget');
    });
    const prompt = 'a lighthouse, failing over';
    const id = await createBatch(api, a, { model: 'eta-image', prompts: [prompt] });
    try {
      await waitFor('the failed request to be recorded', () => Promise.resolve(crashed.mock.calls.length > 0), 30_000, 20);
    } finally {
      crashed.mockRestore();
    }
    const [left] = (await taskRows(api, id)) as unknown as RouteRow[];
    expect(left).toMatchObject({ status: 'running', attempts: 1, route_index: 1, upstream_request_id: null });

    // The crashed run's task comes back through the reconciler (its job is gone with the run).
    const reconciler = gen.get(TaskReconcilerService);
    await waitFor('the task to be taken back', async () => (await reconciler.reconcileOnce()).reenqueued > 0, 30_000, 200);
    await waitForBatchDone(api, id, 60_000);
    const [done] = (await taskRows(api, id)) as unknown as RouteRow[];
    expect(done).toMatchObject({ status: 'succeeded', route_index: 1 });
    expect(failing.submitsFor(prompt)).toBe(1);
    expect(healthy.submitsFor(prompt)).toBe(1);
  });
});
