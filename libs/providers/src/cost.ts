import { BatchTier, RESOLUTIONS } from '@app/geometry';
import type { RouteSetting } from './provider-type';
import { MadeImage, MAX_USD_PER_IMAGE, sizeTablePrice } from './price-rule';

export { MAX_USD_PER_IMAGE };

/**
 * What one image costs the operator upstream, in USD, as the operator's own `cost` table lists
 * it (docs/providers.md "Upstream cost"); where it lists the image it wins over the route's
 * price rule (price-rule.ts). Two forms, which a route may mix:
 * - by Kiln resolution: `{ "1K": 0.04, "2K": 0.08 }`;
 * - by the upstream's own size and, optionally, quality (types whose upstream bills that way,
 *   i.e. `openai`): `{ "1024x1024": { "low": 0.011, "medium": 0.042, "high": 0.167 }, "1536x1024": 0.063 }`.
 * An upstream size entry wins over the resolution's, since it is what the upstream billed.
 */
export type RouteCost = Record<string, number | Partial<Record<QualityPrice, number>>> & {
  /**
   * The upstream's batch API price (economy tier), in the same forms; absent: economy tasks
   * are recorded at the list price above (which overstates their cost).
   */
  economy?: Record<string, number | Partial<Record<QualityPrice, number>>>;
};

type QualityPrice = 'low' | 'medium' | 'high' | 'auto';
const QUALITY_PRICES: readonly string[] = ['low', 'medium', 'high', 'auto'];

const isPrice = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= MAX_USD_PER_IMAGE;
const SIZE_KEY = /^[1-9]\d{1,4}x[1-9]\d{1,4}$/;

/** The `cost` check: resolution keys always; upstream size keys (with quality maps) when the type bills by size. */
function checkCost(bySize: boolean, nested = false): (v: unknown) => string | null {
  return (v) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return 'invalid';
    for (const [key, price] of Object.entries(v as Record<string, unknown>)) {
      if (key === 'economy' && !nested) {
        const reason = checkCost(bySize, true)(price);
        if (reason) return reason;
      } else if ((RESOLUTIONS as readonly string[]).includes(key)) {
        if (!isPrice(price)) return 'invalid_price';
      } else if (bySize && SIZE_KEY.test(key)) {
        if (isPrice(price)) continue;
        if (price === null || typeof price !== 'object' || Array.isArray(price)) return 'invalid_price';
        const entries = Object.entries(price as Record<string, unknown>);
        if (entries.length === 0 || entries.some(([q, p]) => !QUALITY_PRICES.includes(q) || !isPrice(p))) return 'invalid_price';
      } else {
        return 'unknown_key';
      }
    }
    return null;
  };
}

/** The route setting `cost`, for every type that calls (or stands in for) an upstream. */
export function costSetting(opts: { bySize: boolean }): RouteSetting {
  return {
    name: 'cost',
    required: false,
    description: opts.bySize
      ? 'Your own price in USD per image, by Kiln resolution ({"1K": 0.04}) or by upstream size and quality ({"1024x1024": {"low": 0.011, "medium": 0.042, "high": 0.167}}); "economy": the batch API price in the same forms. Wins over `price` where it lists the image; operators only'
      : 'Your own price in USD per image by Kiln resolution ({"1K": 0.04, "2K": 0.08}); "economy": the batch API price in the same form. Wins over `price` where it lists the image; operators only',
    check: checkCost(opts.bySize),
  };
}

/**
 * The operator's table price of one image in USD; null when the table does not list it (the
 * route's price rule then applies). An economy task is priced at the table's `economy` prices
 * when it has them, else at its list prices (which overstates the cost).
 */
export function operatorCostUsd(route: object | null | undefined, made: MadeImage, tier: BatchTier = 'standard'): number | null {
  const listed = (route as { cost?: RouteCost } | null | undefined)?.cost;
  if (!listed || typeof listed !== 'object') return null;
  const cost: Record<string, number | Partial<Record<QualityPrice, number>>> =
    tier === 'economy' && listed.economy && typeof listed.economy === 'object' ? listed.economy : listed;
  const bySize = cost[`${made.width}x${made.height}`] as RouteCost[string] | undefined;
  return bySize !== undefined ? sizeTablePrice(bySize, made.quality) : sizeTablePrice(cost[made.resolution], made.quality);
}
