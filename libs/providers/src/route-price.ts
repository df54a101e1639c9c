import { BatchTier } from '@app/geometry';
import { operatorCostUsd } from './cost';
import { pixelSize } from './image-size';
import type { MadeImage, PriceRule } from './price-rule';
import { ProviderRoute, providerType, withDefaults } from './provider-types.registry';
import type { RenderResolution } from './render.types';

/**
 * What one image cost upstream in USD, from what the upstream really made: the operator's own
 * `cost` table where it lists the image, else the route's `price` rule through its type's
 * price function (an economy task at the rule's `economyFactor`). 0 for a local type (no
 * upstream); null when nothing prices it: the image is recorded unpriced, never at $0.
 */
export function upstreamCostUsd(
  route: ProviderRoute | object | null | undefined,
  made: MadeImage,
  tier: BatchTier = 'standard',
): number | null {
  const def = providerType((route as { type?: unknown } | null | undefined)?.type);
  if (def && !def.pricing) return 0;
  const operator = operatorCostUsd(route, made, tier);
  if (operator !== null) return operator;
  const rule = (route as { price?: PriceRule } | null | undefined)?.price;
  if (!rule || !def?.pricing) return null;
  const usd = def.pricing.price(rule, made);
  if (usd === null || !Number.isFinite(usd)) return null;
  return tier === 'economy' && rule.economyFactor !== undefined ? usd * rule.economyFactor : usd;
}

/** upstreamCostUsd in integer micro-dollars, as tasks record it (null: unpriced). */
export function upstreamCostMicros(
  route: ProviderRoute | object | null | undefined,
  made: MadeImage,
  tier: BatchTier = 'standard',
): number | null {
  const usd = upstreamCostUsd(route, made, tier);
  return usd === null ? null : Math.round(usd * 1_000_000);
}

/**
 * What the route would pay for one standard image of a pair before any is made: the size its
 * upstream makes for it, quality `auto` (the dearest), a per-second rule at its
 * `typicalSeconds`. null: the route cannot price the pair.
 */
export function pairPriceUsd(route: ProviderRoute, ratio: string, resolution: RenderResolution): number | null {
  const def = providerType((route as { type?: unknown })?.type);
  const asked = pixelSize(ratio, resolution);
  const expanded = def ? withDefaults(route) : route;
  const made = def?.sizeFor?.(expanded, { ...asked, aspectRatio: ratio, resolution }) ?? asked;
  const rule = (route as { price?: PriceRule }).price;
  const runSeconds = rule?.per === 'second' ? rule.typicalSeconds : undefined;
  return upstreamCostUsd(route, { resolution, width: made.width, height: made.height, quality: null, runSeconds });
}
