import type { RouteSetting } from './provider-type';
import { checkPriceRule, TypePricing } from './price-rule';

/** The route setting `price`: the upstream's price rule, in the kinds the type's upstream bills by. */
export function priceSetting(pricing: TypePricing): RouteSetting {
  const kinds = pricing.kinds.map((k) => `"${k}"`).join(', ');
  return {
    name: 'price',
    required: false,
    description:
      `How the upstream bills an image (a route by preset takes the preset's): {"per": ${kinds}, "usd": ...}` +
      (pricing.reportsTokens ? '; "tokens": USD per million tokens, used when the answer reports usage' : '') +
      '; "economyFactor": the batch API price as a share. The `cost` table, when it lists the image, wins; operators only',
    check: checkPriceRule(pricing.kinds),
  };
}
