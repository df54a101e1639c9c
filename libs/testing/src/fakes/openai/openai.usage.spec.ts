import { OpenAiProvider, pixelSize, RenderRequest, upstreamCostMicros } from '@app/providers';
import { OpenAiFakeUpstream } from './openai.fake';

const fake = new OpenAiFakeUpstream();

beforeAll(() => fake.start());
afterAll(() => fake.stop());

const provider = () =>
  new OpenAiProvider({
    baseUrl: fake.baseUrl,
    apiKey: 'sk-test-0123456789',
    model: 'gpt-image-1',
    timeoutMs: 5000,
    allowPrivate: true, // the fake upstream is on 127.0.0.1
    maxImageBytes: 8 * 1024 * 1024,
    upstreamSize: () => '1536x1024', // gpt-image-1's legal size for 3:2
  });

const request = (quality: RenderRequest['quality']): RenderRequest => ({
  prompt: 'A lighthouse',
  seed: 42,
  ...pixelSize('3:2', '1K'),
  resolution: '1K',
  aspectRatio: '3:2',
  quality,
  background: null,
  references: [],
});

describe('openai: the usage of an answer prices the image', () => {
  it('a render carries the usage tokens of its answer; the route rule prices them, so high costs more than low', async () => {
    const high = await provider().render(request('high'));
    const low = await provider().render(request('low'));
    expect(high.usage).toEqual({ inputTextTokens: 20, inputImageTokens: 0, outputImageTokens: 6208, outputTextTokens: 0 });
    const route = {
      type: 'openai',
      baseUrl: fake.baseUrl,
      model: 'gpt-image-1',
      price: { per: 'size', usd: { '1536x1024': 0.063 }, tokens: { input: 5, output: 40 } },
    };
    const cost = (r: typeof high, quality: string) =>
      upstreamCostMicros(route, { resolution: '1K', width: r.width, height: r.height, quality, usage: r.usage });
    expect(cost(high, 'high')).toBe(Math.round(((20 * 5 + 6208 * 40) / 1e6) * 1e6));
    expect(cost(low, 'low')).toBe(Math.round(((20 * 5 + 400 * 40) / 1e6) * 1e6));
  });
});
