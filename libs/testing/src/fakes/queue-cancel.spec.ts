import { FalProvider, RenderRequest, ReplicateProvider } from '@app/providers';
import { FakeQueueUpstream } from './fake-queue-upstream';
import { fakeFal } from './fal/fal.fake';
import { fakeReplicate } from './replicate/replicate.fake';

const deps = { timeoutMs: 1000, allowPrivate: true, maxImageBytes: 1024 * 1024 };

/**
 * What a cancel answers, read from each upstream's own answers: only the vendor's "it did
 * not run" is `cancelled` (refunded); passing trouble never is, and a hung upstream is
 * bounded by the route's timeout.
 */
describe('queue upstream cancels', () => {
  const fakes: FakeQueueUpstream[] = [];
  afterAll(async () => {
    for (const fake of fakes) await fake.stop();
  });
  const started = async (fake: FakeQueueUpstream) => {
    fakes.push(fake);
    await fake.start();
    return fake;
  };
  const request = { prompt: 'a kiln', seed: 1, width: 1024, height: 1024, references: [] } as unknown as RenderRequest;

  it('fal: 202 for a request still in the queue is cancelled; 400 ALREADY_COMPLETED runs; 429 busy; 5xx and a hang unknown', async () => {
    const fake = await started(fakeFal({ holdInQueue: true }));
    const fal = new FalProvider({ type: 'fal', model: 'fal-ai/flux/dev', baseUrl: fake.baseUrl }, { apiKey: 'k', ...deps });
    const queued = await fal.submit(request);
    expect(queued.state.cancelUrl).toMatch(/\/fal-ai\/flux\/requests\/.+\/cancel$/);
    expect(await fal.cancel(queued)).toMatchObject({ outcome: 'cancelled' });
    expect(fake.seenAt(/\/cancel$/).map((s) => s.method)).toEqual(['PUT']);

    const running = await fal.submit({ ...request, prompt: 'a kiln [running]' });
    expect(await fal.cancel(running)).toMatchObject({ outcome: 'runs', detail: expect.stringContaining('ALREADY_COMPLETED') });

    fake.answerNext({ status: 429, headers: { 'retry-after': '2' }, body: '{"detail":"slow down"}' });
    expect(await fal.cancel(queued)).toEqual({ outcome: 'busy', detail: expect.any(String), retryAfterMs: 2000 });
    fake.answerNext({ status: 503, body: '{"detail":"unavailable"}' });
    expect(await fal.cancel(queued)).toMatchObject({ outcome: 'unknown' });
    fake.answerNext('hang');
    const before = Date.now();
    expect(await fal.cancel(queued)).toMatchObject({ outcome: 'unknown' });
    expect(Date.now() - before).toBeLessThan(5000);
  });

  it('Replicate: canceled without output is cancelled; succeeded runs; an unclear answer is unknown', async () => {
    const fake = await started(fakeReplicate({ holdInQueue: true, queueMs: 50 }));
    const replicate = new ReplicateProvider(
      { type: 'replicate', model: 'black-forest-labs/flux-schnell', baseUrl: fake.baseUrl },
      { apiKey: 'r8', ...deps },
    );
    const queued = await replicate.submit(request);
    expect(await replicate.cancel(queued)).toMatchObject({ outcome: 'cancelled', detail: 'canceled' });
    expect(fake.seenAt(/\/cancel$/).map((s) => [s.method, s.headers.authorization])).toEqual([['POST', 'Bearer r8']]);

    const made = await replicate.submit({ ...request, prompt: 'a kiln [running]' });
    await new Promise((r) => setTimeout(r, 100));
    expect(await replicate.cancel(made)).toMatchObject({ outcome: 'runs', detail: 'succeeded' });

    fake.answerNext({ status: 200, body: JSON.stringify({ id: 'x', status: 'processing', output: null }) });
    expect(await replicate.cancel(queued)).toMatchObject({ outcome: 'unknown' });
  });
});
