import { TestingModule } from '@nestjs/testing';
import { buildConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import {
  createBatch,
  fakeQueueUpstream,
  fileEnvironment,
  FileEnvironment,
  refundRows,
  taskRows,
  TestAccount,
  TestApp,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(90_000);

const CONCURRENCY = 8;
const FAILURES_TO_OPEN = 2;

/**
 * A chain of two queue routes (fal): the tasks a generator admitted to the first route while
 * its circuit was closed, and that then wait for the route's one slot, do not submit there
 * once the generator has seen the circuit open; they move on to the second route (no request
 * or submit intent of theirs is recorded on the first, so the move is allowed).
 */
describe('failover: a queue route seen open is skipped by the tasks waiting for its slot', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  // Every request the primary takes fails once run (fal does not bill it); each submit holds
  // the route's one slot for a while, so the others wait in its line.
  const primary = fakeQueueUpstream('fal', { queueMs: 50, failAll: true, holdSubmitAnswerMs: 500, imageSize: { width: 64, height: 64 } });
  const fallback = fakeQueueUpstream('fal', { queueMs: 50, imageSize: { width: 64, height: 64 } });

  beforeAll(async () => {
    await primary.start();
    await fallback.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('route_failover_queue', {
      upstream: { ...base.upstream, allowPrivate: true },
      providerApiKeys: { FAL_KEY: 'fal-test-key:secret' },
      generator: { concurrency: CONCURRENCY, maxAttempts: 4, backoffMs: 50, reconcileIntervalMs: 600_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 10_000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await primary.stop();
    await fallback.stop();
    await env?.teardown();
  });

  it('once the circuit opened, no waiting task submits to the first route; every task is made by the second, each submitted once there', async () => {
    const route = (fake: typeof primary, extra: Record<string, unknown> = {}) =>
      ({ preset: 'fal/fal-ai/flux/schnell', baseUrl: fake.baseUrl, pollIntervalMs: 100, ...extra }) as unknown as ProviderRoute;
    await api
      .admin('patch', '/v1/admin/models/eta-image')
      .send({
        routes: [route(primary, { maxConcurrency: 1 }), route(fallback)],
        // No probe within the test: the first route, once open, stays open.
        failover: { failuresToOpen: FAILURES_TO_OPEN, cooldownMs: 600_000 },
      })
      .expect(200);
    const prompts = Array.from({ length: 12 }, (_, i) => `seen open ${i}`);
    const id = await createBatch(api, a, { model: 'eta-image', prompts });
    await waitForBatchDone(api, id, 60_000);

    const tasks = await taskRows(api, id);
    expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
    expect(tasks.every((t) => (t as unknown as { route_index: number }).route_index === 1)).toBe(true);
    // CONCURRENCY tasks were admitted to the first route before its circuit opened; those that
    // reached its slot after the generator saw it open went to the second instead. The
    // circuit opens with the FAILURES_TO_OPEN-th failed request, the submit then holding the
    // slot finishes, and one more may be past its check.
    const submittedToPrimary = prompts.reduce((n, p) => n + primary.submitsFor(p), 0);
    expect(submittedToPrimary).toBeGreaterThanOrEqual(FAILURES_TO_OPEN);
    expect(submittedToPrimary).toBeLessThanOrEqual(FAILURES_TO_OPEN + 2);
    for (const p of prompts) {
      expect(primary.submitsFor(p)).toBeLessThanOrEqual(1);
      expect(fallback.submitsFor(p)).toBe(1);
    }
    expect(await refundRows(api, id)).toHaveLength(0);
    expect(await api.balance(a.id)).toBe(await api.ledgerSum(a.id));
  });
});
