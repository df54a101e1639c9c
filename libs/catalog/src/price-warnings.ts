import type { ModelEntity, Resolution } from '@app/database';
import { pairPriceUsd, providerType, RouteWarning, routeWarnings } from '@app/providers';

/** One ratio x resolution pair of a model. */
export interface WarnedPair {
  aspectRatio: string;
  resolution: Resolution;
}

/**
 * What is wrong with the price of a model's route (spec v1.3 section 2), beside the preset
 * warnings: `unpriced`, the pairs it offers that nothing prices (their images would be
 * recorded unpriced); `no_margin`, the pairs whose upstream price is at or above what the
 * model charges (credits x CREDIT_VALUE_USD), `marginUsd` the lowest margin among them.
 */
export type PriceWarning =
  | { code: 'unpriced'; pairs: WarnedPair[]; message: string }
  | { code: 'no_margin'; pairs: (WarnedPair & { marginUsd: number })[]; marginUsd: number; message: string };

const micros = (usd: number) => Math.round(usd * 1_000_000);

/** The price warnings of a model's route, checked over every pair it offers (standard tier). */
export function priceWarnings(
  model: Pick<ModelEntity, 'provider' | 'resolutionsByRatio' | 'creditCost'>,
  creditValueUsd: number,
): PriceWarning[] {
  const route = model.provider;
  // A local type has no upstream to pay.
  if (!providerType((route as { type?: unknown })?.type)?.pricing) return [];
  const unpriced: WarnedPair[] = [];
  const noMargin: (WarnedPair & { marginUsd: number })[] = [];
  for (const [aspectRatio, resolutions] of Object.entries(model.resolutionsByRatio)) {
    for (const resolution of resolutions) {
      const credits = model.creditCost[resolution];
      if (typeof credits !== 'number') continue; // not offered
      const price = pairPriceUsd(route, aspectRatio, resolution);
      if (price === null) {
        unpriced.push({ aspectRatio, resolution });
        continue;
      }
      const margin = credits * micros(creditValueUsd) - micros(price);
      if (margin <= 0) noMargin.push({ aspectRatio, resolution, marginUsd: margin / 1_000_000 });
    }
  }
  const warnings: PriceWarning[] = [];
  if (unpriced.length) {
    warnings.push({
      code: 'unpriced',
      pairs: unpriced,
      message: `The route cannot price ${unpriced.length} pair(s) it offers: give it a price rule or a cost table, or their images are recorded unpriced`,
    });
  }
  if (noMargin.length) {
    const marginUsd = Math.min(...noMargin.map((p) => p.marginUsd));
    warnings.push({
      code: 'no_margin',
      pairs: noMargin,
      marginUsd,
      message: `The route costs as much as the model charges, or more, for ${noMargin.length} pair(s) (margin down to USD ${marginUsd}): raise creditCost or route elsewhere`,
    });
  }
  return warnings;
}

/** Everything GET /v1/admin/models and the admin model edits warn about a model's route: its preset retiring, its price. */
export function modelRouteWarnings(
  model: Pick<ModelEntity, 'provider' | 'resolutionsByRatio' | 'creditCost'>,
  creditValueUsd: number,
  now: Date = new Date(),
): (RouteWarning | PriceWarning)[] {
  return [...routeWarnings(model.provider, now), ...priceWarnings(model, creditValueUsd)];
}
