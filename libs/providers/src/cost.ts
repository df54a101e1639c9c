import { RESOLUTIONS } from '@app/geometry';
import type { RouteSetting } from './provider-type';

/**
 * What one image costs the operator upstream, in USD, as the route's `cost` setting lists it
 * (docs/providers.md "Upstream cost"). Two forms, which a route may mix:
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

/** Where a price may not go: above this an operator surely typed cents or micro-dollars. */
export const MAX_USD_PER_IMAGE = 100;

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
      ? 'List price in USD per image, by Kiln resolution ({"1K": 0.04}) or by upstream size and quality ({"1024x1024": {"low": 0.011, "medium": 0.042, "high": 0.167}}); "economy": the batch API price in the same forms; operators only'
      : 'List price in USD per image by Kiln resolution ({"1K": 0.04, "2K": 0.08}); "economy": the batch API price in the same form; operators only',
    check: checkCost(opts.bySize),
  };
}

/** What a finished task's upstream call made, as its cost depends on it. */
export interface MadeImage {
  resolution: string;
  /** The upstream's image size (the task's result size). */
  width: number;
  height: number;
  /** The batch's quality (null or absent when the model takes none). */
  quality: string | null;
}

/**
 * The upstream cost of one image in integer micro-dollars (0 when the route lists no price
 * for it). Quality `auto`, or none, is priced at the `auto` entry if listed, else the dearest
 * listed quality: the upstream chose, and the report should not flatter the margin.
 */
export function upstreamCostMicros(route: object | null | undefined, made: MadeImage, tier: 'standard' | 'economy' = 'standard'): number {
  const listed = (route as { cost?: RouteCost } | null | undefined)?.cost;
  if (!listed || typeof listed !== 'object') return 0;
  // An economy task is priced at the batch API's price when the route lists one, else at the list price.
  const cost: Record<string, number | Partial<Record<QualityPrice, number>>> = tier === 'economy' && listed.economy && typeof listed.economy === 'object' ? listed.economy : listed;
  const bySize = cost[`${made.width}x${made.height}`] as RouteCost[string] | undefined;
  const price = bySize !== undefined ? priceOf(bySize, made.quality) : priceOf(cost[made.resolution], made.quality);
  return price === null ? 0 : Math.round(price * 1_000_000);
}

function priceOf(entry: RouteCost[string] | undefined, quality: string | null): number | null {
  if (entry === undefined) return null;
  if (typeof entry === 'number') return entry;
  const asked = quality && quality !== 'auto' ? entry[quality as QualityPrice] : entry.auto;
  if (asked !== undefined) return asked;
  const listed = Object.values(entry).filter((p): p is number => typeof p === 'number');
  return listed.length ? Math.max(...listed) : null;
}
