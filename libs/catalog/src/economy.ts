import type { ModelEntity, Resolution } from '@app/database';
import { ErrorCode, invalidRequest, KilnError } from '@app/errors';
import { RESOLUTIONS } from '@app/geometry';
import { hasBatchApi, type ProviderRoute } from '@app/providers';

/**
 * The economy tier of a model (docs/admin.md "Economy tier"): credits per image by resolution
 * (`economyCreditCost`, null: none) and the window within which every task of an economy
 * batch ends (`economyWindowHours`), served through the route's upstream batch API, which
 * the route turns on with `batch: { enabled: true, ... }` (on a chain, the first route that
 * does serves economy tasks).
 */

/** The window an operator may give: one hour to a week (OpenAI's and Gemini's batch windows are 24 h). */
export const ECONOMY_WINDOW_HOURS = { min: 1, max: 168 } as const;

/** What a model offers on the economy tier now, or null when it offers none. */
export interface EconomyOffer {
  /** Credits per image by resolution: only resolutions also priced on the standard tier. */
  creditCost: Partial<Record<Resolution, number>>;
  windowHours: number;
}

/**
 * Whether a route runs upstream batches: its type has a batch API (libs/providers' registry)
 * and its `batch.enabled` is true. A `batch` setting on a type without a batch API runs
 * nothing, so it does not count.
 */
export function routeRunsBatches(route: unknown): boolean {
  return hasBatchApi(route as ProviderRoute);
}

/**
 * Whether some route of the model's chain runs batches (its `routes`, else its `provider`):
 * economy tasks go to the first that does, and fail over only to a later one that does
 * (docs/providers.md "A chain of routes").
 */
export function chainRunsBatches(model: Pick<ModelEntity, 'provider'> & { routes?: ModelEntity['routes'] }): boolean {
  // The first route is `provider` (what every reader of one route uses, also when a row was edited outside the admin API).
  return [model.provider, ...(model.routes ?? []).slice(1)].some(routeRunsBatches);
}

/**
 * The model's economy tier as clients may use it: prices and a window set, and a route of its
 * chain that runs batches. The admin API keeps the three consistent (validateEconomy); this
 * also holds for a row edited outside it, so a create is never accepted for economy work no
 * route runs.
 */
export function economyOffer(
  model: Pick<ModelEntity, 'economyCreditCost' | 'economyWindowHours' | 'creditCost' | 'provider'> & {
    routes?: ModelEntity['routes'];
  },
): EconomyOffer | null {
  const prices = model.economyCreditCost;
  if (!prices || model.economyWindowHours === null || model.economyWindowHours === undefined || !chainRunsBatches(model)) return null;
  const creditCost: Partial<Record<Resolution, number>> = {};
  for (const res of RESOLUTIONS) {
    if (typeof prices[res] === 'number' && typeof model.creditCost[res] === 'number') creditCost[res] = prices[res];
  }
  if (Object.keys(creditCost).length === 0) return null;
  return { creditCost, windowHours: model.economyWindowHours };
}

/**
 * The economy price of one image at `resolution`, or tier_not_available: the model has no
 * economy tier, or none at this resolution (details name what it does offer).
 */
export function economyUnitCost(model: ModelEntity, resolution: Resolution): { unitCost: number; windowHours: number } {
  const offer = economyOffer(model);
  if (!offer) {
    throw new KilnError(ErrorCode.TierNotAvailable, `${model.key} has no economy tier; use the standard tier`, {
      model: model.key,
      tier: 'economy',
    });
  }
  const unitCost = offer.creditCost[resolution];
  if (typeof unitCost !== 'number') {
    const offered = RESOLUTIONS.filter((r) => typeof offer.creditCost[r] === 'number');
    throw new KilnError(ErrorCode.TierNotAvailable, `${model.key} offers the economy tier only at ${offered.join(', ')}`, {
      model: model.key,
      tier: 'economy',
      resolution,
      economyResolutions: offered,
    });
  }
  return { unitCost, windowHours: offer.windowHours };
}

/**
 * The operator's economy settings of a model about to be stored: prices a non-empty subset of
 * the standard prices' resolutions, each a positive integer at most `maxCreditCost`; a window
 * of whole hours in ECONOMY_WINDOW_HOURS, required with prices (kept, unused, without them);
 * and prices only on a route that runs batches. `pricesEdited`: the edit set economyCreditCost
 * (the refusal then names it; otherwise the route change is what took the batches away).
 */
export function validateEconomy(m: ModelEntity, maxCreditCost: number, pricesEdited: boolean): void {
  const window = m.economyWindowHours ?? null;
  if (window !== null && (!Number.isInteger(window) || window < ECONOMY_WINDOW_HOURS.min || window > ECONOMY_WINDOW_HOURS.max)) {
    throw invalidRequest(
      'economyWindowHours',
      'out_of_range',
      `Invalid economyWindowHours: a whole number of hours from ${ECONOMY_WINDOW_HOURS.min} to ${ECONOMY_WINDOW_HOURS.max}, or null`,
    );
  }
  const prices = m.economyCreditCost ?? null;
  if (prices === null) return;
  if (typeof prices !== 'object' || Array.isArray(prices)) throw invalidRequest('economyCreditCost', 'not_an_object');
  const entries = Object.entries(prices);
  if (entries.length === 0) {
    throw invalidRequest(
      'economyCreditCost',
      'empty',
      'Invalid economyCreditCost: price at least one resolution, or pass null to offer no economy tier',
    );
  }
  for (const [res, cost] of entries) {
    const field = `economyCreditCost.${res}`;
    if (!RESOLUTIONS.includes(res as Resolution)) throw invalidRequest(field, 'unknown_resolution');
    if (!Number.isInteger(cost) || cost < 1) throw invalidRequest(field, 'not_a_positive_integer');
    if (cost > maxCreditCost) throw invalidRequest(field, 'out_of_range');
    if (typeof m.creditCost[res as Resolution] !== 'number') {
      throw invalidRequest(
        field,
        'not_priced_at_standard',
        `Invalid ${field}: ${res} has no standard price (creditCost), so it is not offered at all`,
      );
    }
  }
  if (window === null) {
    throw invalidRequest(
      'economyWindowHours',
      'required',
      'Invalid economyWindowHours: required with economyCreditCost (hours within which an economy batch ends)',
    );
  }
  if (!chainRunsBatches(m)) {
    const chained = (m.routes?.length ?? 0) > 1;
    throw pricesEdited
      ? invalidRequest(
          'economyCreditCost',
          'route_batch_not_enabled',
          `Invalid economyCreditCost: ${chained ? "no route of the model's chain runs" : "the model's route does not run"} upstream batches; give it provider.batch { "enabled": true }${chained ? ' (on a route of routes)' : ''} in the same or an earlier edit`,
        )
      : invalidRequest(
          chained ? 'routes' : 'provider.batch',
          'required_by_economy_tier',
          `Invalid ${chained ? 'routes' : 'provider.batch'}: the model has an economy tier (economyCreditCost), so ${chained ? 'a route of its chain' : 'its route'} must keep batch { "enabled": true }; or clear economyCreditCost with null in the same edit`,
        );
  }
}
