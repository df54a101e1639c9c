import sharp from 'sharp';
import { ProviderError, RenderRequest } from '../render.types';
import { SimulatedProvider, scaledSize } from './simulated.provider';

function request(overrides: Partial<RenderRequest> = {}): RenderRequest {
  return {
    prompt: 'a test',
    seed: 1,
    width: 1360,
    height: 768,
    resolution: '1K',
    aspectRatio: '16:9',
    quality: null,
    background: null,
    references: [],
    ...overrides,
  };
}

/** Replays the given values in order, so each branch is chosen on purpose. */
function sequence(...values: number[]): () => number {
  let i = 0;
  return () => values[i++ % values.length];
}

describe('SimulatedProvider', () => {
  const rates = { rateLimitRate: 0.1, failureRate: 0.2 };

  it('rate-limits (retryable) when the roll falls in the rate-limit share', async () => {
    const provider = new SimulatedProvider(rates, sequence(0.05));
    const err = await provider.render(request()).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'rate_limited', retryable: true, status: 429 });
  });

  it('fails (not retryable) when the roll falls in the failure share', async () => {
    const provider = new SimulatedProvider(rates, sequence(0.25));
    const err = await provider.render(request()).catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'upstream_error', retryable: false, message: 'Simulated upstream failure' });
  });

  it('returns a real PNG scaled so its longer side is 64, and says so', async () => {
    const provider = new SimulatedProvider(rates, sequence(0.5));
    const progress: number[] = [];
    const result = await provider.render(request({ onProgress: (p) => progress.push(p) }));
    expect(result).toMatchObject({ contentType: 'image/png', width: 64, height: 36 });
    const meta = await sharp(result.data).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(['png', 64, 36]);
    expect(progress).toEqual([30, 70]);
  });

  it('encodes each size once', async () => {
    const provider = new SimulatedProvider({}, sequence(0.9));
    const a = await provider.render(request({ width: 768, height: 1360 }));
    const b = await new SimulatedProvider().render(request({ width: 768, height: 1360 }));
    expect(a.data).toBe(b.data);
    expect([a.width, a.height]).toEqual([36, 64]);
  });

  it('scales square and extreme ratios', () => {
    expect(scaledSize(1024, 1024)).toEqual({ width: 64, height: 64 });
    expect(scaledSize(1568, 672)).toEqual({ width: 64, height: 27 });
  });

  it('waits a latency drawn from the range', async () => {
    const provider = new SimulatedProvider({ latencyMs: { min: 40, max: 80 } }, sequence(0.5, 0.9));
    const started = Date.now();
    await provider.render(request());
    expect(Date.now() - started).toBeGreaterThanOrEqual(55);
  });

  it('stops waiting when the caller aborts, with the caller reason', async () => {
    const provider = new SimulatedProvider({ latencyMs: 10_000 });
    const controller = new AbortController();
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 20);
    const started = Date.now();
    await expect(provider.render(request({ signal: controller.signal }))).rejects.toBe(reason);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
