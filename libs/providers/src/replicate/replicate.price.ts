import { applyPriceRule, TypePricing } from '../price-rule';

/**
 * How Replicate bills a model: official models per output image (some per megapixel), other
 * models per second of run time (the prediction's `metrics.predict_time`).
 */
export const replicatePricing: TypePricing = {
  kinds: ['image', 'second', 'megapixel'],
  reportsTokens: false,
  price: (rule, made) => applyPriceRule(rule, made),
};
