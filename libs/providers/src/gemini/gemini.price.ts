import type { Resolution } from '@app/geometry';
import { applyPriceRule, priceByTokensOr, TypePricing } from '../price-rule';

/**
 * The output resolution Gemini bills an image at, from the size it made: about 1, 4 and 16
 * megapixels for 1K, 2K and 4K at every ratio (a 21:9 2K image is 3168x1344, 4.1 MP).
 */
export function geminiBilledResolution(width: number, height: number): Resolution {
  const mp = (width * height) / (1024 * 1024);
  return mp <= 2 ? '1K' : mp <= 8 ? '2K' : '4K';
}

/**
 * How Google bills a Gemini image: by the tokens its answer reports (`usageMetadata`) when it
 * reports them, else by the output resolution the image was made at.
 */
export const geminiPricing: TypePricing = {
  kinds: ['resolution', 'image'],
  reportsTokens: true,
  price: (rule, made) =>
    priceByTokensOr(rule, made, () => applyPriceRule(rule, { ...made, resolution: geminiBilledResolution(made.width, made.height) })),
};
