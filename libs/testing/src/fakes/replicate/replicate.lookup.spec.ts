import { providerType, RenderRequest, ReplicateProvider, validateRoute } from '@app/providers';
import { fakeReplicate } from './replicate.fake';

const deps = { apiKey: 'r8_test', timeoutMs: 2000, allowPrivate: true, maxImageBytes: 1024 * 1024 };
const request = (prompt: string, seed: number) => ({ prompt, seed, width: 1024, height: 1024, references: [] }) as unknown as RenderRequest;

/**
 * A submit in doubt after a crash, looked up in Replicate's predictions listing (newest first,
 * 100 a page): found by model, prompt and seed; absent once the listing reaches predictions
 * older than the intent; passing trouble of the listing is thrown, never taken for absent.
 */
describe('replicate: a submit in doubt found again in the predictions listing', () => {
  const fake = fakeReplicate({ queueMs: 60_000 });
  let provider: ReplicateProvider;
  beforeAll(async () => {
    await fake.start();
    provider = new ReplicateProvider({ type: 'replicate', model: 'black-forest-labs/flux-schnell', baseUrl: fake.baseUrl }, deps);
  });
  afterAll(() => fake.stop());

  it('finds the prediction of the key past the first page, and not one of another seed or model', async () => {
    const since = new Date();
    const wanted = await provider.submit(request('the one', 7));
    for (let i = 0; i < 150; i++) await provider.submit(request(`other ${i}`, i));
    const other = new ReplicateProvider({ type: 'replicate', model: 'black-forest-labs/flux-dev', baseUrl: fake.baseUrl }, deps);
    await other.submit(request('the one', 8));

    const found = await provider.findSubmitted(provider.submitKey(request('the one', 7)), since);
    expect(found).toEqual({ state: 'found', submission: wanted });
    expect(fake.seenAt(/^\/v1\/predictions(\?|$)/)).toHaveLength(2);
    expect(await provider.findSubmitted(provider.submitKey(request('the one', 9)), since)).toEqual({ state: 'absent' });
    expect(await other.findSubmitted(other.submitKey(request('the one', 7)), since)).toEqual({ state: 'absent' });
  });

  it('a listing answering 503 is thrown (retried with the intent kept), not taken for absent', async () => {
    fake.answerNext({ status: 503, body: '{"detail":"unavailable"}' });
    await expect(provider.findSubmitted(provider.submitKey(request('x', 1)), new Date())).rejects.toMatchObject({
      kind: 'upstream_error',
      retryable: true,
    });
  });

  it('onUnknownSubmit is a queue route setting: resubmit by default, resubmit or fail, anything else invalid', () => {
    const setting = providerType('fal')!.settings.find((s) => s.name === 'onUnknownSubmit')!;
    expect(setting.default).toBe('resubmit');
    const route = { type: 'bfl', model: 'flux-pro-1.1' };
    expect(() => validateRoute({ ...route, onUnknownSubmit: 'fail' })).not.toThrow();
    expect(() => validateRoute({ ...route, onUnknownSubmit: 'maybe' })).toThrow(/provider.onUnknownSubmit/);
  });
});
