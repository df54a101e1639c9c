import { buildConfig, KilnConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import { FakeQueueUpstream, QueueDialect } from '@app/providers';
import { TestApp, batchRow, createBatch, fileEnvironment, FileEnvironment, GeneratorProcess, refundRows, routeModel, spawnGenerator, taskRows, waitFor, waitForBatchDone } from '@app/testing';
import { bootApi } from './helpers/apps';

const KEY_ENV: Record<QueueDialect, Record<string, string>> = {
  fal: { FAL_KEY: 'fal-test:key' },
  replicate: { REPLICATE_API_TOKEN: 'r8_test' },
  bfl: { BFL_API_KEY: 'bfl-test' },
};
const MODEL: Record<QueueDialect, string> = { fal: 'fal-ai/flux/schnell', replicate: 'black-forest-labs/flux-schnell', bfl: 'flux-pro-1.1' };

/** Short locks and leases so a killed generator's waiting tasks are taken over within seconds. */
const CHILD_ENV = {
  GENERATOR_CONCURRENCY: '4',
  QUEUE_LOCK_DURATION_MS: '1000',
  QUEUE_STALLED_INTERVAL_MS: '500',
  RECONCILE_INTERVAL_MS: '1000',
  TASK_LEASE_MS: '3000',
  TASK_MAX_ATTEMPTS: '4',
  TASK_BACKOFF_MS: '50',
  UPSTREAM_LEASE_MS: '2000',
  UPSTREAM_ALLOW_PRIVATE: 'true',
};

jest.setTimeout(120_000);

/**
 * The built generator as a child process against fake queue upstreams: killed after the
 * submits, a new generator resumes every request, and the upstream saw exactly one submit
 * per task (spec extensions v1.2 section 2: never pay an upstream twice).
 */
describe('generator process: queue upstreams survive SIGKILL and SIGTERM without paying twice', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  const children: GeneratorProcess[] = [];

  function start(_dialect: QueueDialect, extra: Record<string, string> = {}): GeneratorProcess {
    // Every key on every generator: the api refuses a route whose key a live generator lacks.
    const g = spawnGenerator(config, { ...CHILD_ENV, ...KEY_ENV.fal, ...KEY_ENV.replicate, ...KEY_ENV.bfl, ...extra });
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

  async function batchOn(fake: FakeQueueUpstream, dialect: QueueDialect, prompts: string[]): Promise<string> {
    const a = await api.account({ plan: 'scale', credits: 10_000 });
    const route = { preset: `${dialect}/${MODEL[dialect]}`, baseUrl: fake.baseUrl, pollIntervalMs: 200 } as unknown as ProviderRoute;
    const restore = await routeModel(api, 'eta-image', route);
    try {
      return await createBatch(api, a, { model: 'eta-image', prompts });
    } finally {
      await restore();
    }
  }

  async function allRecorded(batchId: string, n: number): Promise<void> {
    await waitFor(
      `${n} upstream requests recorded`,
      async () => (await taskRows(api, batchId)).filter((t) => t.upstream_request_id).length === n,
      60_000,
      20,
    );
  }

  beforeAll(async () => {
    const base = buildConfig(process.env);
    env = await fileEnvironment('gen_queue_proc', { upstream: { ...base.upstream, allowPrivate: true } });
    config = env.config;
    api = await bootApi(config);
  });
  afterAll(async () => {
    for (const c of children) if (c.child.exitCode === null && c.child.signalCode === null) c.child.kill('SIGKILL');
    await Promise.all(children.map((c) => c.exited));
    await api?.close();
    await env?.teardown();
  });

  it.each(['fal', 'replicate', 'bfl'] as const)('%s: SIGKILL after the submits, a new generator resumes each request; one submit per task', (dialect) =>
    withOutput(async () => {
      const fake = new FakeQueueUpstream(dialect, { queueMs: 5000, imageSize: { width: 64, height: 64 } });
      await fake.start();
      try {
        const prompts = Array.from({ length: 20 }, (_, i) => `${dialect} crash ${i}`);
        const id = await batchOn(fake, dialect, prompts);
        const first = start(dialect);
        await allRecorded(id, 20);
        first.child.kill('SIGKILL');
        expect((await first.exited).signal).toBe('SIGKILL');
        expect((await taskRows(api, id)).every((t) => t.status === 'running')).toBe(true);

        const second = start(dialect);
        await waitForBatchDone(api, id, 60_000);
        second.child.kill('SIGTERM');
        expect((await second.exited).code).toBe(0);

        const tasks = await taskRows(api, id);
        expect(tasks.map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
        // A job still active in Bull when the kill came is delivered again (a second claim):
        // that claim resumes the recorded request, it does not submit it again.
        expect(tasks.every((t) => t.attempts <= 2 && t.result_url)).toBe(true);
        for (const p of prompts) expect(fake.submitsFor(p)).toBe(1);
        expect(fake.submits).toBe(20);
        expect(await refundRows(api, id)).toHaveLength(0);
        expect(await batchRow(api, id)).toMatchObject({ status: 'succeeded', succeeded_count: 20 });
      } finally {
        await fake.stop();
      }
    }),
  );

  it('SIGTERM while requests wait upstream: exits 0 within the grace period, the waiting tasks given back, the next generator resumes them', () =>
    withOutput(async () => {
      const fake = new FakeQueueUpstream('fal', { queueMs: 6000, imageSize: { width: 64, height: 64 } });
      await fake.start();
      try {
        const prompts = Array.from({ length: 12 }, (_, i) => `drain ${i}`);
        const id = await batchOn(fake, 'fal', prompts);
        const g = start('fal', { SHUTDOWN_GRACE_MS: '3000', UPSTREAM_LEASE_MS: '60000' });
        await allRecorded(id, 12);
        const sentAt = Date.now();
        g.child.kill('SIGTERM');
        const exit = await g.exited;
        expect(exit.code).toBe(0);
        expect(exit.at - sentAt).toBeLessThan(3000 + 2000);
        // Given back, not left to a lease of a minute: still waiting upstream, held by nobody.
        const waiting = await taskRows(api, id);
        expect(waiting.every((t) => t.status === 'running' && t.upstream_poll_at && t.upstream_poller === null)).toBe(true);

        const next = start('fal', { UPSTREAM_LEASE_MS: '60000' });
        await waitForBatchDone(api, id, 60_000);
        next.child.kill('SIGTERM');
        await next.exited;
        expect((await taskRows(api, id)).map((t) => t.status)).toEqual(prompts.map(() => 'succeeded'));
        expect(fake.submits).toBe(12);
      } finally {
        await fake.stop();
      }
    }),
  );
});
