import { bflType } from './bfl/bfl.type';
import { builtinType } from './builtin/builtin.type';
import { falType } from './fal/fal.type';
import { geminiType } from './gemini/gemini.type';
import { openaiType } from './openai/openai.type';
import { pixelSize } from './image-size';
import type { ProviderContext, ProviderPreset, ProviderTypeDefinition, RouteBase } from './provider-type';
import { RouteSettingsError } from './provider-type';
import { replicateType } from './replicate/replicate.type';
import { isProviderError, RenderResolution } from './render.types';
import { isHonest } from './size-rules';
import { describePriceRule } from './price-rule';
import { simulatedType } from './simulated/simulated.type';

/**
 * Every provider type Kiln knows, one line each, in the order docs, OpenAPI and
 * GET /v1/admin/providers list them. Adding a type is a folder under libs/providers/src/
 * and a line here; the catalog, route health, telemetry, the factory and the admin API
 * read everything else from the type's definition (provider-type.ts).
 */
export const PROVIDER_TYPES = [builtinType, openaiType, geminiType, simulatedType, falType, replicateType, bflType] as const;

type RouteOf<D> = D extends { create(route: infer R, context: ProviderContext): unknown } ? R : never;

/** How the catalog routes a model; stored as JSON on each model and snapshotted on each batch. */
export type ProviderRoute = RouteOf<(typeof PROVIDER_TYPES)[number]>;

export type ProviderTypeName = ProviderRoute['type'];

export const PROVIDER_TYPE_NAMES: ProviderTypeName[] = PROVIDER_TYPES.map((t) => t.type);

/**
 * The key variable every type that calls an upstream declares (its keyVariable), once each:
 * the config lib reads each of these, and its `<NAME>_FILE` form, as an upstream key, besides
 * every name of the generic upstream key form (isUpstreamKeyName).
 */
export const UPSTREAM_KEY_VARIABLES: readonly string[] = [
  ...new Set(PROVIDER_TYPES.flatMap((t) => (t.keyVariable === null ? [] : [t.keyVariable]))),
];

const BY_NAME = new Map<string, ProviderTypeDefinition>(PROVIDER_TYPES.map((t) => [t.type, t as unknown as ProviderTypeDefinition]));

/** The definition of a route's type; undefined for a type Kiln does not know. */
export function providerType(type: unknown): ProviderTypeDefinition | undefined {
  return typeof type === 'string' ? BY_NAME.get(type) : undefined;
}

function definitionOf(route: ProviderRoute): ProviderTypeDefinition<RouteBase> {
  const def = providerType(route?.type);
  if (!def) throw new RouteSettingsError('provider.type', 'unknown_provider');
  return def;
}

/** Every preset of every type, in registry order. */
export function allPresets(): ProviderPreset[] {
  return PROVIDER_TYPES.flatMap((t) => [...t.presets]);
}

/**
 * Checks a route against its type's settings schema, in the schema's order; throws a
 * RouteSettingsError naming the first bad field (`provider.<name>`) and why. Fields the
 * schema does not list are left alone, as the catalog always has.
 */
export function validateRoute(route: unknown): asserts route is ProviderRoute {
  if (!route || typeof route !== 'object' || Array.isArray(route)) throw new RouteSettingsError('provider', 'not_an_object');
  const def = definitionOf(route as ProviderRoute);
  const fields = route as Record<string, unknown>;
  for (const setting of def.settings) {
    const value = fields[setting.name];
    if (value === undefined && !setting.required) continue;
    const reason = setting.check(value);
    if (reason) throw new RouteSettingsError(`provider.${setting.name}`, reason);
  }
}

/** The route with every omitted setting that has a default filled in. */
export function withDefaults<R extends ProviderRoute>(route: R): R {
  const filled: Record<string, unknown> = { ...route };
  for (const setting of definitionOf(route).settings) {
    if (filled[setting.name] === undefined && setting.default !== undefined) filled[setting.name] = setting.default;
  }
  return filled as R;
}

/** The environment variable a route's upstream key comes from, or null when it needs none (or its type is unknown). */
export function requiredKey(route: ProviderRoute): string | null {
  const def = providerType(route?.type);
  if (!def || def.keyVariable === null) return null;
  return (route as { apiKeyEnv?: string }).apiKeyEnv ?? def.keyVariable;
}

/** Where a route sends its calls, for logs: never a key. */
export function routeLabel(route: ProviderRoute): string {
  const def = providerType(route?.type);
  return def ? def.describe(withDefaults(route)) : String(route?.type);
}

/**
 * The types whose upstream has a cancel for an accepted request (`cancelsUpstream`): a batch
 * cancel asks it for their tasks. Stored routes name their type, so this list is what SQL
 * compares `provider->>'type'` with.
 */
export const UPSTREAM_CANCEL_TYPES: readonly string[] = PROVIDER_TYPES.filter((t) => 'cancelsUpstream' in t && t.cancelsUpstream).map(
  (t) => t.type,
);

/** The `provider` label of a route's metrics. */
export function metricsLabel(route: ProviderRoute): string {
  return providerType(route?.type)?.metricsLabel ?? 'unknown';
}

/** The address an operator's route sends to, for the catalog's egress check; null for local types. */
export function upstreamUrl(route: ProviderRoute): string | null {
  return definitionOf(route).upstreamUrl(withDefaults(route));
}

/** Whether the route's upstream bills a request that ended in this failure (ProviderTypeDefinition.billsFailure). */
export function billsFailure(route: ProviderRoute, err: unknown): boolean {
  const def = providerType(route?.type);
  return isProviderError(err) && def?.billsFailure !== undefined && def.billsFailure(err);
}

/** Whether a route renders on the generator's own CPU (a render slot) rather than waiting on an upstream. */
export function rendersOnCpu(route: ProviderRoute): boolean {
  return providerType(route?.type)?.work === 'local-cpu';
}

/**
 * The route shapes for the admin API's OpenAPI description, e.g.
 * `{ type: "builtin" } | { type: "openai", baseUrl, model, apiKeyEnv?, ... }`.
 */
export function routeShapes(): string {
  return PROVIDER_TYPES.map((t) => {
    const fields = t.settings.map((s) => (s.required ? s.name : `${s.name}?`));
    return `{ type: "${t.type}"${fields.map((f) => `, ${f}`).join('')} }`;
  }).join(' | ');
}

/** The route types in one line, e.g. `builtin; openai (baseUrl, model, apiKeyEnv?, ...)`. */
export function routeTypesInBrief(): string {
  return PROVIDER_TYPES.map((t) => {
    const fields = t.settings.map((s) => (s.required ? s.name : `${s.name}?`));
    return fields.length ? `${t.type} (${fields.join(', ')})` : t.type;
  }).join('; ');
}

/** A preset by id (`<type>/<upstream model id>`); undefined when Kiln does not know it. */
export function presetById(id: unknown): ProviderPreset | undefined {
  return typeof id === 'string' ? allPresets().find((p) => p.id === id) : undefined;
}

/**
 * The route an operator's input stands for: `{ "preset": id, ...overrides }` expands to the
 * preset's type and settings with the overrides on top, every default filled in, and
 * `preset` kept as a label, so a later change of the preset list never changes it. A route
 * without a preset is returned as given. Throws RouteSettingsError for an unknown preset or
 * an override of another type; the result still has to pass validateRoute.
 */
export function expandRoute(input: unknown): unknown {
  if (!input || typeof input !== 'object' || Array.isArray(input) || !('preset' in input)) return input;
  const { preset: id, ...overrides } = input as Record<string, unknown>;
  const preset = presetById(id);
  if (!preset) throw new RouteSettingsError('provider.preset', 'unknown_preset');
  if (overrides.type !== undefined && overrides.type !== preset.type) throw new RouteSettingsError('provider.type', 'not_the_preset_type');
  // The preset's price rule becomes the route's `price` (what the usage report records)
  // unless the operator gives their own; the operator's `cost` table, if given, wins over it
  // where it lists an image. Stored expanded like every other setting.
  const def = definitionOf({ type: preset.type } as ProviderRoute);
  const priced = preset.cost && def.settings.some((s) => s.name === 'price') ? { price: preset.cost.rule } : {};
  return withDefaults({ ...priced, ...preset.settings, ...overrides, type: preset.type, preset: preset.id } as unknown as ProviderRoute);
}

/**
 * The ratio x resolution pairs a route cannot make honestly (size-rules.ts isHonest): what
 * its upstream makes for Kiln's size of the pair is another ratio or too small. Empty for a
 * type that makes every size.
 */
export function pairsRouteCannotMake(
  route: ProviderRoute,
  resolutionsByRatio: Record<string, RenderResolution[]>,
): { ratio: string; resolution: RenderResolution }[] {
  const def = providerType(route?.type);
  if (!def?.sizeFor) return [];
  const expanded = withDefaults(route);
  const refused: { ratio: string; resolution: RenderResolution }[] = [];
  for (const [ratio, resolutions] of Object.entries(resolutionsByRatio)) {
    for (const resolution of resolutions) {
      const asked = pixelSize(ratio, resolution);
      const made = def.sizeFor(expanded, { ...asked, aspectRatio: ratio, resolution });
      if (made && !isHonest(asked, made)) refused.push({ ratio, resolution });
    }
  }
  return refused;
}

/** How close a preset's retirement must be before GET /v1/admin/models warns about it. */
export const RETIREMENT_WARNING_DAYS = 30;

export interface RouteWarning {
  code: 'preset_retired' | 'preset_retiring';
  preset: string;
  retiresAt: string;
  message: string;
}

/** Warnings about a stored route: its preset's upstream model has retired, or retires within 30 days. */
export function routeWarnings(route: ProviderRoute, now: Date = new Date()): RouteWarning[] {
  const preset = presetById((route as RouteBase)?.preset);
  if (!preset?.retiresAt) return [];
  const retires = Date.parse(preset.retiresAt);
  if (retires <= now.getTime()) {
    return [
      {
        code: 'preset_retired',
        preset: preset.id,
        retiresAt: preset.retiresAt,
        message: `The upstream model of ${preset.id} was retired on ${preset.retiresAt}: route this model elsewhere`,
      },
    ];
  }
  if (retires - now.getTime() <= RETIREMENT_WARNING_DAYS * 24 * 3600 * 1000) {
    return [
      {
        code: 'preset_retiring',
        preset: preset.id,
        retiresAt: preset.retiresAt,
        message: `The upstream model of ${preset.id} retires on ${preset.retiresAt}: route this model elsewhere before then`,
      },
    ];
  }
  return [];
}

/** GET /v1/admin/providers: every type with its settings, and every preset. */
export function providerCatalog(): {
  types: {
    type: string;
    mode: 'sync' | 'queue';
    summary: string;
    keyVariable: string | null;
    settings: { name: string; required: boolean; default?: unknown; description: string }[];
  }[];
  presets: (ProviderPreset & { price?: string })[];
} {
  return {
    types: PROVIDER_TYPES.map((t) => ({
      type: t.type,
      mode: t.mode,
      summary: t.summary,
      keyVariable: t.keyVariable,
      settings: t.settings.map((s) => ({
        name: s.name,
        required: s.required,
        ...(s.default !== undefined ? { default: s.default } : {}),
        description: s.description,
      })),
    })),
    presets: allPresets().map((p) => (p.cost ? { ...p, cost: withListPrices(p), price: describePriceRule(p.cost, p.type) } : p)),
  };
}

/**
 * A preset's price as GET /v1/admin/providers has always shown it (`usdPerImage` by
 * resolution, `economyUsdPerImage`), derived from its rule for a 1:1 image at each resolution
 * it offers (quality auto, no usage reported), beside the rule itself.
 */
function withListPrices(preset: ProviderPreset): NonNullable<ProviderPreset['cost']> & {
  usdPerImage: Partial<Record<RenderResolution, number>>;
  economyUsdPerImage?: Partial<Record<RenderResolution, number>>;
} {
  const cost = preset.cost!;
  const pricing = providerType(preset.type)?.pricing;
  const offered = [...new Set(Object.values(preset.model.resolutionsByRatio).flat())].sort();
  const usdPerImage: Partial<Record<RenderResolution, number>> = {};
  for (const resolution of offered) {
    const size = pixelSize('1:1', resolution);
    const usd = pricing ? pricing.price(cost.rule, { resolution, ...size, quality: null }) : 0;
    if (usd !== null) usdPerImage[resolution] = Number(usd.toPrecision(6));
  }
  const factor = cost.rule.economyFactor;
  const economy =
    factor !== undefined
      ? {
          economyUsdPerImage: Object.fromEntries(Object.entries(usdPerImage).map(([r, usd]) => [r, Number((usd * factor).toPrecision(6))])),
        }
      : {};
  return { ...cost, usdPerImage, ...economy };
}
