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
  getBatch,
  taskRows,
  TestAccount,
  TestApp,
  waitFor,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';

jest.setTimeout(90_000);

type Row = { id: string; status: string; attempts: number; upstream_request_id: string | null };

/**
 * A fal route (no lookup of a submit in doubt: onUnknownSubmit resubmit) whose submit the
 * upstream took, while recording its answer in PostgreSQL fails. The chaos run's PostgreSQL
 * kill -9 (down 5 s, then its recovery) had three fal tasks submitted twice: the record was
 * tried five times over 5 s, the attempt gave up, and the next one submitted again. Here the
 * record keeps trying through a longer outage, and an attempt taken over meanwhile hands its
 * request to the attempt that took over instead of leaving it unused.
 */
describe('a queue submit whose answer PostgreSQL could not record at once: never submitted twice', () => {
  let env: FileEnvironment;
  let api: TestApp;
  let gen: TestingModule;
  let a: TestAccount;
  let fal: FakeQueueUpstream;

  beforeAll(async () => {
    fal = fakeQueueUpstream('fal', { queueMs: 300, imageSize: { width: 64, height: 64 } });
    await fal.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('queue_submit_record', {
      upstream: { ...base.upstream, allowPrivate: true },
      providerApiKeys: { FAL_KEY: 'fal-test-key:secret' },
      // Passes by hand (reconcileOnce). The lease outlasts the 11 s the first case's record is
      // refused: a live run is not the reconciler's (a CI run took it over at a 1 s lease).
      generator: { concurrency: 2, maxAttempts: 3, backoffMs: 20, reconcileIntervalMs: 600_000, taskLeaseMs: 30_000 },
    });
    api = await bootApi(env.config);
    gen = await bootGenerator(env.config);
    a = await api.account({ plan: 'scale', credits: 10_000 });
    const route = { preset: 'fal/fal-ai/flux/schnell', baseUrl: fal.baseUrl, pollIntervalMs: 100 } as unknown as ProviderRoute;
    await api.admin('patch', '/v1/admin/models/eta-image').send({ provider: route }).expect(200);
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await fal?.stop();
    await env?.teardown();
  });

  /** Until the batch is done, with the reconciler's passes a live generator would make. */
  async function settle(id: string): Promise<void> {
    const reconciler = gen.get(TaskReconcilerService);
    await waitFor(
      'the batch to finish',
      async () => {
        await reconciler.reconcileOnce();
        return (await getBatch(api, a, id)).batch.status === 'succeeded';
      },
      60_000,
      300,
    );
  }

  it('PostgreSQL away for longer than the old five tries (about 11 s): the answer is recorded once it is back; one submit', async () => {
    const waits = gen.get(UpstreamWaitStore);
    const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const record = jest.spyOn(waits, 'recordSubmission');
    for (let i = 0; i < 7; i++) record.mockRejectedValueOnce(refused);
    const prompt = 'a kiln through a PostgreSQL restart';
    try {
      const id = await createBatch(api, a, { model: 'eta-image', prompts: [prompt] });
      await settle(id);
      const [task] = (await taskRows(api, id)) as unknown as Row[];
      expect(task).toMatchObject({ status: 'succeeded', attempts: 1 });
      expect(record.mock.calls.length).toBeGreaterThanOrEqual(8);
    } finally {
      record.mockRestore();
    }
    expect(fal.submitsFor(prompt)).toBe(1);
  });

  it('taken over while its answer could not be recorded: the request goes to the attempt that took over, which polls it; one submit', async () => {
    const waits = gen.get(UpstreamWaitStore);
    const recordSubmission = waits.recordSubmission.bind(waits);
    let staleHandOff: number | null | undefined;
    // What a lease that ran out during the outage leaves: another attempt claimed the task (its
    // attempts bumped) before this one's record, which the fence then refuses.
    const record = jest.spyOn(waits, 'recordSubmission').mockImplementationOnce(async (submission) => {
      await api.db.query(`UPDATE tasks SET attempts = attempts + 1, updated_at = now() WHERE id = $1`, [submission.fence.taskId]);
      // An intent other than the one the submit answers (the new attempt submitted since): nothing is handed over.
      staleHandOff = await waits.handOff(submission, '2000-01-01 00:00:00+00', new Date());
      return recordSubmission(submission);
    });
    const prompt = 'a kiln taken over mid-record';
    try {
      const id = await createBatch(api, a, { model: 'eta-image', prompts: [prompt] });
      await waitFor('the record to be refused', () => Promise.resolve(record.mock.calls.length > 0), 30_000, 20);
      await settle(id);
      const [task] = (await taskRows(api, id)) as unknown as Row[];
      expect(task).toMatchObject({ status: 'succeeded', attempts: 2 });
      expect(task.upstream_request_id).toEqual(expect.any(String));
    } finally {
      record.mockRestore();
    }
    expect(staleHandOff).toBeNull();
    expect(fal.submitsFor(prompt)).toBe(1);
  });
});
