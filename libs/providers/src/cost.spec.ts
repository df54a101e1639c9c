import { allPresets, expandRoute, presetById, validateRoute } from './provider-types.registry';
import { RouteSettingsError } from './provider-type';
import { upstreamCostMicros } from './route-price';

describe('route cost', () => {
  const gpt = {
    type: 'openai',
    baseUrl: 'https://api.openai.com/v1',
    model: 'gpt-image-1',
    cost: { '1K': 0.05, '1024x1024': { low: 0.011, medium: 0.042, high: 0.167 }, '1536x1024': 0.063 },
  };

  it('prices an openai image by the upstream size and quality it made, before the resolution', () => {
    expect(upstreamCostMicros(gpt, { resolution: '1K', width: 1024, height: 1024, quality: 'low' })).toBe(11_000);
    expect(upstreamCostMicros(gpt, { resolution: '1K', width: 1024, height: 1024, quality: 'high' })).toBe(167_000);
    expect(upstreamCostMicros(gpt, { resolution: '1K', width: 1536, height: 1024, quality: 'medium' })).toBe(63_000);
    // A size not listed falls back to the resolution's price.
    expect(upstreamCostMicros(gpt, { resolution: '1K', width: 1024, height: 1536, quality: 'medium' })).toBe(50_000);
  });

  it('prices quality auto (or none) at the dearest listed quality, never flattering the margin', () => {
    expect(upstreamCostMicros(gpt, { resolution: '1K', width: 1024, height: 1024, quality: 'auto' })).toBe(167_000);
    expect(upstreamCostMicros(gpt, { resolution: '1K', width: 1024, height: 1024, quality: null })).toBe(167_000);
  });

  it('is unpriced (null, never 0) for a route without a price for the image, and rounds to whole micro-dollars', () => {
    expect(upstreamCostMicros({ type: 'simulated' }, { resolution: '1K', width: 64, height: 64, quality: null })).toBeNull();
    expect(
      upstreamCostMicros({ type: 'simulated', cost: { '1K': 0.04 } }, { resolution: '2K', width: 64, height: 64, quality: null }),
    ).toBeNull();
    // A local type has no upstream: its images cost nothing, priced or not.
    expect(upstreamCostMicros({ type: 'builtin' }, { resolution: '1K', width: 64, height: 64, quality: null })).toBe(0);
    expect(upstreamCostMicros({ cost: { '2K': 0.0000015 } }, { resolution: '2K', width: 64, height: 64, quality: null })).toBe(2);
  });

  it.each([
    [{ type: 'simulated', cost: [] }, 'invalid'],
    [{ type: 'simulated', cost: { '1K': -1 } }, 'invalid_price'],
    [{ type: 'simulated', cost: { '1K': '0.04' } }, 'invalid_price'],
    [{ type: 'simulated', cost: { '8K': 0.04 } }, 'unknown_key'],
    // Only types whose upstream bills by its own size take size keys.
    [{ type: 'simulated', cost: { '1024x1024': 0.04 } }, 'unknown_key'],
    [{ type: 'fal', model: 'fal-ai/flux/schnell', cost: { '1024x1024': 0.04 } }, 'unknown_key'],
    [{ ...gpt, cost: { '1024x1024': { ultra: 0.2 } } }, 'invalid_price'],
    [{ ...gpt, cost: { '1024x1024': {} } }, 'invalid_price'],
  ])('refuses a bad cost through the type settings schema: %j', (route, reason) => {
    let err: unknown;
    try {
      validateRoute(route);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RouteSettingsError);
    expect(err).toMatchObject({ field: 'provider.cost', reason });
  });

  it('accepts both forms where the type bills by size', () => {
    expect(() => validateRoute(gpt)).not.toThrow();
    expect(() => validateRoute({ type: 'simulated', cost: { '1K': 0.01, '2K': 0.02 } })).not.toThrow();
  });

  it("a route by preset takes the preset's price rule as its price; the operator's cost table is kept beside it", () => {
    expect(expandRoute({ preset: 'gemini/gemini-3.1-flash-image' })).toEqual(
      expect.objectContaining({ type: 'gemini', price: presetById('gemini/gemini-3.1-flash-image')!.cost!.rule }),
    );
    expect(expandRoute({ preset: 'openai/gpt-image-1' })).not.toHaveProperty('cost');
    expect(expandRoute({ preset: 'fal/fal-ai/flux/schnell', cost: { '1K': 0.002 } })).toMatchObject({
      type: 'fal',
      cost: { '1K': 0.002 },
      price: { per: 'megapixel', usd: 0.003, rounding: 'up' },
    });
    // builtin has no price setting: nothing is added to its routes.
    const builtin = allPresets().find((p) => p.type === 'builtin');
    if (builtin) expect(expandRoute({ preset: builtin.id })).not.toHaveProperty('price');
  });

  it("the operator's cost table wins where it lists the image; the rule prices the rest", () => {
    const route = expandRoute({ preset: 'fal/fal-ai/flux/dev', cost: { '1K': 0.02 } }) as object;
    expect(upstreamCostMicros(route, { resolution: '1K', width: 1024, height: 1024, quality: null })).toBe(20_000);
    expect(upstreamCostMicros(route, { resolution: '2K', width: 2048, height: 2048, quality: null })).toBe(100_000);
  });

  it('routes stored before price rules keep their cost table, valid and priced as before', () => {
    const stored = { type: 'fal', model: 'fal-ai/flux/dev', preset: 'fal/fal-ai/flux/dev', cost: { '1K': 0.025 } };
    expect(() => validateRoute(stored)).not.toThrow();
    expect(upstreamCostMicros(stored, { resolution: '1K', width: 1024, height: 1024, quality: null })).toBe(25_000);
    // What the table does not list is unpriced, not $0.
    expect(upstreamCostMicros(stored, { resolution: '2K', width: 2048, height: 2048, quality: null })).toBeNull();
  });

  it('every preset with a price says the day it was read, and its price passes its type schema', () => {
    const priced = allPresets().filter((p) => p.cost);
    expect(priced.length).toBeGreaterThan(5);
    for (const preset of priced) {
      expect(preset.cost!.readOn).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(preset.cost!.source).toBeTruthy();
      expect(() => validateRoute({ type: preset.type, ...preset.settings, price: preset.cost!.rule })).not.toThrow();
      expect(() => validateRoute(expandRoute({ preset: preset.id }))).not.toThrow();
    }
  });
});
