import { applyPriceRule, TypePricing } from '../price-rule';

/** How Black Forest Labs bills a model: per image (FLUX.1 models, in credits of USD 0.01) or per megapixel made. */
export const bflPricing: TypePricing = {
  kinds: ['image', 'megapixel'],
  reportsTokens: false,
  price: (rule, made) => applyPriceRule(rule, made),
};
