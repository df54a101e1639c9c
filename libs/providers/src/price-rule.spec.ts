import { readFileSync } from 'fs';
import { join } from 'path';
import { bflPricing } from './bfl/bfl.price';
import { falPricing } from './fal/fal.price';
import { geminiBilledResolution, geminiPricing } from './gemini/gemini.price';
import { geminiUsageOf } from './gemini/gemini.usage';
import { openAiPricing } from './openai/openai.price';
import { openAiUsageOf } from './openai/openai.usage';
import { checkPriceRule, describePriceRule, MadeImage, PRICE_KINDS, PriceRule } from './price-rule';
import { RouteSettingsError } from './provider-type';
import { allPresets, expandRoute, presetById, validateRoute } from './provider-types.registry';
import { replicatePricing } from './replicate/replicate.price';
import { pairPriceUsd, upstreamCostMicros } from './route-price';

const made = (width: number, height: number, more: Partial<MadeImage> = {}): MadeImage => ({
  resolution: '1K',
  width,
  height,
  quality: null,
  ...more,
});
const ruleOf = (presetId: string): PriceRule => presetById(presetId)!.cost!.rule;
const route = (presetId: string) => expandRoute({ preset: presetId }) as object;

describe('price functions: each type prices what its upstream made, as the vendor bills it', () => {
  it('fal: flux/dev per megapixel, rounded up; a 2K image (2048x2048) is 4 megapixels, not the 1K price nor $0', () => {
    const dev = ruleOf('fal/fal-ai/flux/dev');
    expect(falPricing.price(dev, made(1024, 1024))).toBeCloseTo(0.025, 9);
    expect(falPricing.price(dev, made(2048, 2048, { resolution: '2K' }))).toBeCloseTo(0.1, 9);
    // A started megapixel is billed whole: 1344x768 is under one, 1440x1440 is two.
    expect(falPricing.price(dev, made(1344, 768))).toBeCloseTo(0.025, 9);
    expect(falPricing.price(dev, made(1440, 1440))).toBeCloseTo(0.05, 9);
    expect(upstreamCostMicros(route('fal/fal-ai/flux/dev'), made(2048, 2048, { resolution: '2K' }))).toBe(100_000);
    // Per image where fal lists it so (ultra: one price up to 4 MP).
    expect(falPricing.price(ruleOf('fal/fal-ai/flux-pro/v1.1-ultra'), made(2048, 2048))).toBe(0.06);
  });

  it('openai: by size x quality; 1536x1024 high and 1024x1024 low differ; auto is the dearest', () => {
    const gpt = ruleOf('openai/gpt-image-1');
    const low = openAiPricing.price(gpt, made(1024, 1024, { quality: 'low' }));
    const high = openAiPricing.price(gpt, made(1536, 1024, { quality: 'high' }));
    expect(low).toBe(0.011);
    expect(high).toBe(0.25);
    expect(openAiPricing.price(gpt, made(1536, 1024, { quality: 'auto' }))).toBe(0.25);
    expect(openAiPricing.price(gpt, made(1024, 1024, { quality: 'medium' }))).toBe(0.042);
    // A size OpenAI does not list is not priced by guess.
    expect(openAiPricing.price(gpt, made(2048, 2048))).toBeNull();
  });

  it('openai: by the usage tokens when the answer reports them', () => {
    const usage = openAiUsageOf({
      usage: { input_tokens: 50, output_tokens: 6208, input_tokens_details: { text_tokens: 40, image_tokens: 10 } },
    });
    expect(usage).toEqual({ inputTextTokens: 40, inputImageTokens: 10, outputImageTokens: 6208, outputTextTokens: 0 });
    // 40 x 5 + 10 x 10 + 6208 x 40 per million.
    const usd = openAiPricing.price(ruleOf('openai/gpt-image-1'), made(1536, 1024, { quality: 'high', usage }));
    expect(usd).toBeCloseTo((40 * 5 + 10 * 10 + 6208 * 40) / 1e6, 12);
    expect(upstreamCostMicros(route('openai/gpt-image-1'), made(1536, 1024, { quality: 'high', usage }))).toBe(248_620);
    // The Batch API at the rule's economy factor.
    expect(upstreamCostMicros(route('openai/gpt-image-1'), made(1536, 1024, { quality: 'high', usage }), 'economy')).toBe(124_310);
    expect(openAiUsageOf({ created: 1, data: [] })).toBeUndefined();
  });

  it('gemini: by the output resolution it made, or by usageMetadata tokens when reported', () => {
    const flash = ruleOf('gemini/gemini-3.1-flash-image');
    expect(geminiBilledResolution(1344, 768)).toBe('1K');
    expect(geminiBilledResolution(3168, 1344)).toBe('2K');
    expect(geminiBilledResolution(4096, 4096)).toBe('4K');
    // Priced at what was made, whatever resolution the batch named.
    expect(geminiPricing.price(flash, made(2048, 2048, { resolution: '1K' }))).toBe(0.101);
    expect(geminiPricing.price(flash, made(4096, 4096, { resolution: '4K' }))).toBe(0.151);
    const usage = geminiUsageOf({
      usageMetadata: {
        promptTokenCount: 20,
        candidatesTokenCount: 1130,
        thoughtsTokenCount: 100,
        candidatesTokensDetails: [{ modality: 'IMAGE', tokenCount: 1120 }],
      },
    });
    expect(usage).toEqual({ inputTextTokens: 20, inputImageTokens: 0, outputImageTokens: 1120, outputTextTokens: 110 });
    expect(geminiPricing.price(flash, made(1024, 1024, { usage }))).toBeCloseTo((20 * 0.5 + 1120 * 60 + 110 * 3) / 1e6, 12);
  });

  it('bfl: per image, whatever the size', () => {
    expect(bflPricing.price(ruleOf('bfl/flux-pro-1.1'), made(1440, 1440))).toBe(0.04);
    expect(bflPricing.price({ per: 'megapixel', usd: 0.03, rounding: 'up' }, made(2048, 2048))).toBeCloseTo(0.12, 9);
  });

  it('replicate: per image, or per second of the run time the prediction reports', () => {
    expect(replicatePricing.price(ruleOf('replicate/black-forest-labs/flux-schnell'), made(1024, 1024))).toBe(0.003);
    const perSecond: PriceRule = { per: 'second', usd: 0.001525 };
    expect(replicatePricing.price(perSecond, made(1024, 1024, { runSeconds: 2 }))).toBeCloseTo(0.00305, 12);
    // No run time reported: unpriced, not $0.
    expect(replicatePricing.price(perSecond, made(1024, 1024))).toBeNull();
  });

  it('a route prices each pair it offers at the size its upstream makes for it (route warnings)', () => {
    const dev = expandRoute({ preset: 'fal/fal-ai/flux/dev' }) as Parameters<typeof pairPriceUsd>[0];
    expect(pairPriceUsd(dev, '1:1', '1K')).toBeCloseTo(0.025, 9);
    expect(pairPriceUsd({ type: 'simulated' }, '1:1', '1K')).toBeNull();
  });

  it('describePriceRule: one line with the date and the source', () => {
    expect(describePriceRule(presetById('fal/fal-ai/flux/dev')!.cost!, 'fal')).toMatch(
      /^USD 0\.025 per megapixel, rounded up \(fal, read 2026-11-28, https:\/\/fal\.ai\/models\/fal-ai\/flux\/dev\); unconfirmed: /,
    );
    expect(describePriceRule({ per: 'image', usd: 0.04 })).toBe('USD 0.04 per image');
    expect(describePriceRule(ruleOf('openai/gpt-image-1'))).toContain('1536x1024 low 0.016 / medium 0.063 / high 0.25');
    for (const kind of PRICE_KINDS) expect(describePriceRule(ruleOfKind(kind))).not.toMatch(/\n|undefined/);
  });

  it("docs/providers.md shows every preset's price line, as describePriceRule writes it today", () => {
    const docs = readFileSync(join(__dirname, '../../../docs/providers.md'), 'utf8');
    for (const preset of allPresets().filter((p) => p.cost && p.type !== 'builtin')) {
      expect({ preset: preset.id, shown: docs.includes(describePriceRule(preset.cost!, preset.type)) }).toEqual({
        preset: preset.id,
        shown: true,
      });
    }
  });

  it.each([
    [{ per: 'token', usd: 1 }, 'unknown_per'],
    [{ per: 'megapixel', usd: 0.025 }, 'invalid_rounding'],
    [{ per: 'image', usd: -1 }, 'invalid_price'],
    [{ per: 'image', usd: 0.04, tokens: { output: 40 } }, 'invalid_tokens'],
    [{ per: 'image', usd: 0.04, economyFactor: 2 }, 'invalid_economy_factor'],
    [{ per: 'image', usd: 0.04, colour: 'blue' }, 'unknown_key'],
  ])('refuses a bad price rule: %j', (price, reason) => {
    expect(checkPriceRule(PRICE_KINDS)(price)).toBe(reason);
  });

  it("refuses a kind the type's upstream does not bill by, through the route schema", () => {
    let err: unknown;
    try {
      validateRoute({ type: 'fal', model: 'fal-ai/flux/dev', price: { per: 'second', usd: 0.001 } });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(RouteSettingsError);
    expect(err).toMatchObject({ field: 'provider.price', reason: 'unknown_per' });
  });
});

function ruleOfKind(kind: PriceRule['per']): PriceRule {
  switch (kind) {
    case 'image':
      return { per: 'image', usd: 0.04 };
    case 'resolution':
      return { per: 'resolution', usd: { '1K': 0.067 } };
    case 'megapixel':
      return { per: 'megapixel', usd: 0.025, rounding: 'exact', megapixel: 1_000_000 };
    case 'size':
      return { per: 'size', usd: { '1024x1024': 0.04 } };
    case 'second':
      return { per: 'second', usd: 0.0015, typicalSeconds: 3 };
  }
}
