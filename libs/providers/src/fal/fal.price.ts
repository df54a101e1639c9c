import { applyPriceRule, TypePricing } from '../price-rule';

/** How fal bills a model: per megapixel of the image it made (most round up to whole ones), or per image. */
export const falPricing: TypePricing = {
  kinds: ['megapixel', 'image'],
  reportsTokens: false,
  price: (rule, made) => applyPriceRule(rule, made),
};
