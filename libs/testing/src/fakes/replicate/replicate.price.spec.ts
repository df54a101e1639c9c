import { ReplicateProvider, pixelSize, upstreamCostMicros, UpstreamPoll } from '@app/providers';
import { fakeReplicate } from './replicate.fake';

const fake = fakeReplicate({ queueMs: 0 });
let baseUrl = '';

beforeAll(async () => {
  await fake.start();
  baseUrl = fake.baseUrl;
});
afterAll(() => fake.stop());

describe('replicate: a per-second route is priced by the run time the prediction reports', () => {
  it('the poll reads metrics.predict_time, the result carries it, and a per-second rule prices it', async () => {
    const route = { type: 'replicate' as const, model: 'owner/some-model', baseUrl, price: { per: 'second' as const, usd: 0.001525 } };
    const provider = new ReplicateProvider(route, {
      apiKey: 'r8_test',
      timeoutMs: 5000,
      allowPrivate: true,
      maxImageBytes: 8 * 1024 * 1024,
    });
    const submission = await provider.submit({
      prompt: 'A lighthouse',
      seed: 1,
      ...pixelSize('1:1', '1K'),
      resolution: '1K',
      aspectRatio: '1:1',
      quality: null,
      background: null,
      references: [],
    });
    let poll: UpstreamPoll = { state: 'waiting' };
    for (let i = 0; i < 20 && poll.state === 'waiting'; i++) poll = await provider.poll(submission);
    expect(poll).toMatchObject({ state: 'done', runSeconds: 1.25 });
    const result = await provider.fetchResult(submission, {}, poll as Extract<UpstreamPoll, { state: 'done' }>);
    expect(result.runSeconds).toBe(1.25);
    const made = { resolution: '1K', width: result.width, height: result.height, quality: null, runSeconds: result.runSeconds };
    expect(upstreamCostMicros(route, made)).toBe(1906); // 1.25 s x USD 0.001525
  });
});
