import { applyPriceRule, PRICE_KINDS, TypePricing } from '../price-rule';

/** The simulated type stands in for any upstream: it takes every kind of price rule, applied as written. */
export const simulatedPricing: TypePricing = {
  kinds: PRICE_KINDS,
  reportsTokens: false,
  price: (rule, made) => applyPriceRule(rule, made),
};
