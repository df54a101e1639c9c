import { Inject, Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { ArrayContains, EntityManager, Repository } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ModelEntity, ProviderRoute, queryRows, Resolution } from '@app/database';
import { checkEgressTarget, isEgressError } from '@app/egress';
import { ErrorCode, KilnError, invalidRequest } from '@app/errors';
import { ASPECT_RATIO_PATTERN, RESOLUTIONS } from '@app/geometry';
import {
  expandRoute,
  failoverOf,
  FailoverSettings,
  MAX_ROUTES,
  mergeFailover,
  pairsRouteCannotMake,
  presetById,
  RouteSettingsError,
  upstreamUrl,
  validateRoute,
} from '@app/providers';
import { validateEconomy } from './economy';
import { claimOpenAiNames, validateOpenAiAliases } from './openai-aliases';

export const CATALOG_DEFAULTS = {
  aspectRatio: '1:1',
  resolution: '1K',
  countPerCombo: 1,
  refMode: 'none',
  quality: 'auto',
} as const;
/**
 * The most reference images any batch may carry, whatever the model says: a model with no
 * declared cap (`maxRefImages: null`) gets this one, and no operator edit may go above it.
 * Each reference is read and decoded for every task that carries it, so the cap bounds a
 * task's render work as well as a request's fan-out.
 */
export const MAX_REF_IMAGES = 16;
/** The most images any plan may allow in one batch (an operator's plan edit cannot go above it). */
export const MAX_IMAGES_PER_BATCH = 100_000;
/** Credits per image an operator may set: a batch's charge (at most MAX_IMAGES_PER_BATCH images) then fits an int4 column. */
export const MAX_CREDIT_COST = 10_000;

export const CATALOG_LIMITS = {
  countPerCombo: { min: 1, max: 20 },
  maxPrompts: 1000,
  maxRefImages: MAX_REF_IMAGES,
  upload: {
    maxBytes: 10 * 1024 * 1024,
    maxFiles: 20,
    types: ['image/png', 'image/jpeg', 'image/webp', 'image/gif'],
  },
} as const;

export interface ModelPatch {
  displayName?: string;
  blurb?: string;
  creditCost?: Partial<Record<Resolution, number>>;
  /** Credits per image on the economy tier by resolution; null: no economy tier (economy.ts). */
  economyCreditCost?: Partial<Record<Resolution, number>> | null;
  /** Hours within which an economy batch's tasks all end; required with economyCreditCost. */
  economyWindowHours?: number | null;
  resolutionsByRatio?: Record<string, Resolution[]>;
  enabled?: boolean;
  supportsRefImages?: boolean;
  maxRefImages?: number | null;
  supportsQuality?: boolean;
  supportsBackground?: boolean;
  maxPromptLength?: number;
  /** A route, or `{ preset, ...overrides }` (see resolveRoute): the one-route shorthand of `routes`. */
  provider?: ProviderRoute;
  /** The chain of routes (each what `provider` takes), first the primary; at most MAX_ROUTES. */
  routes?: unknown[];
  /** Failover settings over the current ones (libs/providers failover.ts). */
  failover?: Partial<FailoverSettings>;
  /** OpenAI model names the OpenAI-compatible door accepts for this model (openai-aliases.ts); [] clears. */
  openaiAliases?: string[];
}

/** A new model: every field of a patch, a key, and optionally the preset that gives pairs, caps, supports and route. */
export interface NewModel extends ModelPatch {
  key: string;
  displayName: string;
  creditCost: Partial<Record<Resolution, number>>;
  fromPreset?: string;
}

/** Model keys: what clients type in `model`, and part of URLs. */
const MODEL_KEY = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** How long an edit waits for the base URL's host name to resolve before accepting it unchecked. */
const BASE_URL_LOOKUP_TIMEOUT_MS = 3000;

/** The usual ratio order; PostgreSQL's jsonb does not keep key order, so the catalog restores it. */
const RATIO_ORDER = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];

export function orderedRatios(model: Pick<ModelEntity, 'resolutionsByRatio'>): string[] {
  const rank = (r: string) => {
    const i = RATIO_ORDER.indexOf(r);
    return i === -1 ? RATIO_ORDER.length : i;
  };
  return Object.keys(model.resolutionsByRatio).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}

/** Resolutions a model offers: the priced ones, in 1K/2K/4K order. */
export function pricedResolutions(model: Pick<ModelEntity, 'creditCost'>): Resolution[] {
  return RESOLUTIONS.filter((r) => typeof model.creditCost[r] === 'number');
}

@Injectable()
export class CatalogService {
  constructor(
    @InjectRepository(ModelEntity) private readonly models: Repository<ModelEntity>,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /** Enabled models only: a disabled model is unknown to clients. */
  async listEnabled(): Promise<ModelEntity[]> {
    return this.models.find({ where: { enabled: true }, order: { sortOrder: 'ASC' } });
  }

  async listAll(): Promise<ModelEntity[]> {
    return this.models.find({ order: { sortOrder: 'ASC' } });
  }

  async requireEnabled(key: string): Promise<ModelEntity> {
    const model = typeof key === 'string' ? await this.models.findOne({ where: { key, enabled: true } }) : null;
    if (!model) throw new KilnError(ErrorCode.UnknownModel, `Unknown model: ${key}`, { model: key });
    return model;
  }

  /**
   * The OpenAI-compatible door's lookup: a model key, else an OpenAI name an operator gave an
   * enabled model (openaiAliases). Only the door accepts aliases; Kiln's own API takes keys.
   */
  async requireEnabledByOpenAiName(name: string): Promise<ModelEntity> {
    const byAlias = () => this.models.findOne({ where: { openaiAliases: ArrayContains([name]), enabled: true } });
    const model =
      typeof name === 'string' ? ((await this.models.findOne({ where: { key: name, enabled: true } })) ?? (await byAlias())) : null;
    if (!model) throw new KilnError(ErrorCode.UnknownModel, `Unknown model: ${name}`, { model: name });
    return model;
  }

  async get(key: string): Promise<ModelEntity> {
    const model = await this.models.findOne({ where: { key } });
    if (!model) throw new KilnError(ErrorCode.NotFound, `Model ${key} not found`);
    return model;
  }

  /**
   * Operator edit. Validates the combination so the catalog never offers an unpriced size,
   * nor a pair its route cannot make (honest sizes). `resolutionsByRatio` sets the model's
   * own pairs, offered as given. A new route offers the model's own pairs again: a route
   * given by preset those it can make (narrowed), any other all of them (or is refused), so
   * routing to a narrower preset and back restores them.
   */
  async update(key: string, patch: ModelPatch): Promise<ModelEntity> {
    const model = await this.get(key);
    const chain = patch.provider !== undefined || patch.routes !== undefined ? resolveChain(patch) : undefined;
    const failover = patch.failover !== undefined ? asInvalidRequest(() => mergeFailover(model.failover, patch.failover)) : undefined;
    const next: ModelEntity = {
      ...model,
      ...stripUndefined({ ...patch, provider: chain?.routes[0], routes: chain?.routes, failover }),
    };
    const rerouted = chain !== undefined || (failover !== undefined && failover.sizes !== failoverOf(model.failover).sizes);
    if (patch.resolutionsByRatio !== undefined) next.ownResolutionsByRatio = patch.resolutionsByRatio;
    else if (rerouted) next.resolutionsByRatio = narrowedPairs(next.ownResolutionsByRatio, sizeRoutes(next));
    validateModel(next, patch.economyCreditCost !== undefined);
    if (rerouted || patch.resolutionsByRatio !== undefined) checkHonestSizes(next);
    if (chain) await this.checkRouteAddresses(chain);
    await this.writeClaimingNames(next, (tx) => tx.save(ModelEntity, next));
    return this.get(key);
  }

  /**
   * A new model (POST /v1/admin/models). `fromPreset` gives the pairs (narrowed to the priced
   * resolutions), caps, supports and route the request does not set; without it the route
   * defaults to builtin. Listed after every existing model.
   */
  async create(input: NewModel): Promise<ModelEntity> {
    if (typeof input.key !== 'string' || !MODEL_KEY.test(input.key)) throw invalidRequest('key', 'invalid');
    if (!input.creditCost || typeof input.creditCost !== 'object' || Array.isArray(input.creditCost))
      throw invalidRequest('creditCost', 'required');
    if (await this.models.findOne({ where: { key: input.key } }))
      throw invalidRequest('key', 'taken', `Invalid key: a model ${input.key} exists already`);
    const preset = input.fromPreset !== undefined ? presetById(input.fromPreset) : undefined;
    if (input.fromPreset !== undefined && !preset) throw invalidRequest('fromPreset', 'unknown_preset');
    const chain = resolveChain(
      input.routes !== undefined ? input : { provider: input.provider ?? (preset ? { preset: preset.id } : { type: 'builtin' }) },
    );
    const provider = chain.routes[0];
    const failover = input.failover !== undefined ? asInvalidRequest(() => mergeFailover(null, input.failover)) : null;
    const priced = Object.keys(input.creditCost ?? {});
    const presetPairs = preset
      ? Object.fromEntries(
          Object.entries(preset.model.resolutionsByRatio)
            .map(([ratio, list]) => [ratio, list.filter((r) => priced.includes(r))] as const)
            .filter(([, list]) => list.length > 0),
        )
      : undefined;
    const [{ next: sortOrder }] = await queryRows<{ next: number }>(
      this.models,
      `SELECT COALESCE(MAX(sort_order), 0) + 1 AS next FROM models`,
    );
    const model = this.models.create({
      key: input.key,
      displayName: input.displayName,
      blurb: input.blurb ?? '',
      creditCost: input.creditCost,
      economyCreditCost: input.economyCreditCost ?? null,
      economyWindowHours: input.economyWindowHours ?? null,
      resolutionsByRatio: input.resolutionsByRatio ?? presetPairs ?? {},
      ownResolutionsByRatio: input.resolutionsByRatio ?? presetPairs ?? {},
      supportsRefImages: input.supportsRefImages ?? preset?.model.supportsRefImages ?? true,
      maxRefImages: input.maxRefImages !== undefined ? input.maxRefImages : (preset?.model.maxRefImages ?? null),
      supportsQuality: input.supportsQuality ?? preset?.model.supportsQuality ?? false,
      supportsBackground: input.supportsBackground ?? preset?.model.supportsBackground ?? false,
      maxPromptLength: input.maxPromptLength ?? 4000,
      enabled: input.enabled ?? true,
      provider,
      routes: chain.routes,
      failover,
      openaiAliases: input.openaiAliases ?? [],
      sortOrder: Number(sortOrder),
    });
    if (typeof model.displayName !== 'string' || model.displayName.trim() === '') throw invalidRequest('displayName', 'required');
    if (chain.routes.length > 1 && input.resolutionsByRatio === undefined) {
      model.resolutionsByRatio = narrowedPairs(model.ownResolutionsByRatio, sizeRoutes(model));
    }
    validateModel(model, true);
    checkHonestSizes(model);
    await this.checkRouteAddresses(chain);
    // TypeORM's deep-partial type does not follow the route union past a few types; the row is whole.
    await this.writeClaimingNames(model, (tx) => tx.insert(ModelEntity, model as Parameters<Repository<ModelEntity>['insert']>[0]));
    return this.get(input.key);
  }

  /** Writes a model while no other edit can give its key or OpenAI names to another model (openai-aliases.ts). */
  private async writeClaimingNames(model: ModelEntity, write: (tx: EntityManager) => Promise<unknown>): Promise<void> {
    await this.models.manager.transaction(async (tx) => {
      await claimOpenAiNames(tx, model);
      await write(tx);
    });
  }

  private async checkRouteAddresses(chain: Chain): Promise<void> {
    for (const [i, route] of chain.routes.entries()) {
      const address = upstreamUrl(route);
      if (address) await this.checkUpstreamAddress(address, chain.fieldOf(i));
    }
  }

  /**
   * The same egress check the generator applies to every upstream call, so an operator
   * learns at once that a route points at a loopback, link-local or private address (or at
   * plain http) while UPSTREAM_ALLOW_PRIVATE is off. A name that does not resolve from the
   * api (split DNS, not yet created) is accepted: the generator checks each connection anyway.
   */
  private async checkUpstreamAddress(baseUrl: string, routeField: string): Promise<void> {
    try {
      await checkEgressTarget(
        baseUrl,
        { allowPrivate: this.config.upstream.allowPrivate, allowSetting: 'UPSTREAM_ALLOW_PRIVATE' },
        {
          signal: AbortSignal.timeout(BASE_URL_LOOKUP_TIMEOUT_MS),
        },
      );
    } catch (err) {
      if (isEgressError(err) && err.refused) {
        throw invalidRequest(`${routeField}.baseUrl`, err.reason, `Invalid ${routeField}.baseUrl: ${err.message}`);
      }
    }
  }
}

/** The number of reference images a batch on this model may carry (the hard ceiling when the model declares none). */
export function refImageCap(model: Pick<ModelEntity, 'maxRefImages'>): number {
  return model.maxRefImages === null ? MAX_REF_IMAGES : Math.min(model.maxRefImages, MAX_REF_IMAGES);
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** `economyEdited`: the edit sets economyCreditCost (validateEconomy names the field it refuses by it). */
function validateModel(m: ModelEntity, economyEdited: boolean): void {
  const priced = pricedResolutions(m);
  for (const [res, cost] of Object.entries(m.creditCost)) {
    if (!RESOLUTIONS.includes(res as Resolution)) throw invalidRequest(`creditCost.${res}`, 'unknown_resolution');
    if (!Number.isInteger(cost) || cost < 0) throw invalidRequest(`creditCost.${res}`, 'not_a_non_negative_integer');
    if (cost > MAX_CREDIT_COST) throw invalidRequest(`creditCost.${res}`, 'out_of_range');
  }
  if (priced.length === 0) throw invalidRequest('creditCost', 'empty');
  validatePairs(m.resolutionsByRatio, priced, 'resolutionsByRatio');
  // The own pairs are checked as the offer is: a price taken away is taken from both (set resolutionsByRatio with it).
  validatePairs(m.ownResolutionsByRatio, priced, 'ownResolutionsByRatio');
  if (m.maxRefImages !== null && (!Number.isInteger(m.maxRefImages) || m.maxRefImages < 0)) {
    throw invalidRequest('maxRefImages', 'not_a_non_negative_integer');
  }
  if (m.maxRefImages !== null && m.maxRefImages > MAX_REF_IMAGES) throw invalidRequest('maxRefImages', 'out_of_range');
  if (!Number.isInteger(m.maxPromptLength) || m.maxPromptLength < 1 || m.maxPromptLength > 100_000) {
    throw invalidRequest('maxPromptLength', 'out_of_range');
  }
  routesOf(m).forEach((route, i) => {
    try {
      validateProvider(route);
    } catch (err) {
      if (routesOf(m).length > 1 && err instanceof KilnError && typeof err.details?.field === 'string') {
        throw invalidRequest(`routes[${i}]${err.details.field.replace(/^provider/, '')}`, String(err.details.reason));
      }
      throw err;
    }
  });
  validateOpenAiAliases(m.openaiAliases);
  validateEconomy(m, MAX_CREDIT_COST, economyEdited);
}

/** Pairs with known ratios, each with priced resolutions, at least one; refused naming `field`. */
function validatePairs(pairs: Record<string, Resolution[]>, priced: Resolution[], field: string): void {
  for (const [ratio, list] of Object.entries(pairs)) {
    // The pattern, not isAspectRatio: that guard narrows a string that fails it to never.
    if (!ASPECT_RATIO_PATTERN.test(ratio)) throw invalidRequest(`${field}.${ratio}`, 'bad_ratio');
    if (!Array.isArray(list) || list.length === 0) throw invalidRequest(`${field}.${ratio}`, 'empty');
    for (const res of list) {
      if (!priced.includes(res)) throw invalidRequest(`${field}.${ratio}`, `unpriced_resolution_${res}`);
    }
  }
  if (Object.keys(pairs).length === 0) throw invalidRequest(field, 'empty');
}

/** The route's own type checks it (libs/providers registry); its refusals become invalid_request. */
function validateProvider(p: ProviderRoute): void {
  asInvalidRequest(() => validateRoute(p));
}

/**
 * The route an operator's input stands for: a preset (`{ "preset": id, ...overrides }`)
 * expanded to its type and every setting, stored so; anything else as given. Bad input is
 * invalid_request (field provider.preset or provider.<setting>).
 */
export function resolveRoute(input: unknown): ProviderRoute {
  return asInvalidRequest(() => {
    const route = expandRoute(input);
    validateRoute(route);
    return route;
  });
}

/** A model as the admin API shows it: its whole chain (routes[0] is provider) and the failover settings in force. */
export function modelView<M extends ModelEntity>(m: M): M & { routes: ProviderRoute[]; failover: FailoverSettings } {
  return { ...m, routes: routesOf(m), failover: failoverOf(m.failover) };
}

/** A model's chain as an edit gave it, and the field that names each route in a refusal. */
export interface Chain {
  routes: ProviderRoute[];
  /** `provider` when given as the one-route shorthand, else `routes[i]`. */
  fieldOf(index: number): string;
}

/**
 * The chain an edit stands for: `routes` (each resolved as resolveRoute does, refusals named
 * `routes[i].<setting>`), or `provider`, the one-route shorthand (`routes: [provider]`).
 * Giving both is refused: which one meant the primary would be a guess.
 */
export function resolveChain(input: { provider?: unknown; routes?: unknown }): Chain {
  if (input.routes === undefined) return { routes: [resolveRoute(input.provider)], fieldOf: () => 'provider' };
  if (input.provider !== undefined)
    throw invalidRequest('routes', 'conflicts_with_provider', 'Invalid routes: give routes or provider, not both');
  if (!Array.isArray(input.routes) || input.routes.length === 0) throw invalidRequest('routes', 'empty');
  if (input.routes.length > MAX_ROUTES) throw invalidRequest('routes', 'too_many', `Invalid routes: at most ${MAX_ROUTES} routes`);
  const routes = input.routes.map((route, i) => {
    try {
      return resolveRoute(route);
    } catch (err) {
      if (err instanceof KilnError && typeof err.details?.field === 'string') {
        const field = `routes[${i}]${err.details.field.replace(/^provider/, '')}`;
        throw invalidRequest(field, String(err.details.reason));
      }
      throw err;
    }
  });
  return { routes, fieldOf: (i) => `routes[${i}]` };
}

/** The chain a model (or a batch snapshot) rides on: its routes, else its provider alone. */
export function routesOf(m: Pick<ModelEntity, 'provider' | 'routes'>): ProviderRoute[] {
  return m.routes && m.routes.length > 0 ? m.routes : [m.provider];
}

/** The routes whose sizes the model offers: all of them, or with failover.sizes 'primary' the first. */
function sizeRoutes(m: Pick<ModelEntity, 'provider' | 'routes' | 'failover'>): { index: number; route: ProviderRoute }[] {
  const routes = routesOf(m).map((route, index) => ({ index, route }));
  return failoverOf(m.failover).sizes === 'primary' ? routes.slice(0, 1) : routes;
}

function asInvalidRequest<T>(work: () => T): T {
  try {
    return work();
  } catch (err) {
    if (err instanceof RouteSettingsError) throw invalidRequest(err.field, err.reason);
    throw err;
  }
}

/**
 * Honest sizes: a pair is offered only if the route makes it (docs/providers.md); with a
 * chain, only if every route makes it, or with failover.sizes 'primary' the first.
 */
function checkHonestSizes(m: ModelEntity): void {
  for (const { index, route } of sizeRoutes(m)) {
    const refused = pairsRouteCannotMake(route, m.resolutionsByRatio);
    if (refused.length === 0) continue;
    const pairs = refused.map((p) => `${p.ratio} at ${p.resolution}`);
    const which = routesOf(m).length > 1 ? `route ${index} (${route.type})` : 'the route';
    throw new KilnError(
      ErrorCode.InvalidRequest,
      `Invalid resolutionsByRatio: ${which} cannot make ${pairs.join(', ')} (another ratio, or a smaller image than is charged); offer only the pairs it makes`,
      { field: 'resolutionsByRatio', reason: 'route_cannot_make', pairs, ...(routesOf(m).length > 1 ? { route: index } : {}) },
    );
  }
}

/**
 * The pairs of `pairs` (the model's own) the routes given by preset make (a route without a
 * preset must make them all: checkHonestSizes refuses it otherwise); none left is refused,
 * since the model would offer nothing.
 */
function narrowedPairs(pairs: Record<string, Resolution[]>, routes: { route: ProviderRoute }[]): Record<string, Resolution[]> {
  const refused = new Set(
    routes
      .filter(({ route }) => route.preset)
      .flatMap(({ route }) => pairsRouteCannotMake(route, pairs).map((p) => `${p.ratio}@${p.resolution}`)),
  );
  const kept = Object.fromEntries(
    Object.entries(pairs)
      .map(([ratio, list]) => [ratio, list.filter((r) => !refused.has(`${ratio}@${r}`))] as const)
      .filter(([, list]) => list.length > 0),
  );
  if (Object.keys(kept).length === 0) {
    throw invalidRequest(
      'resolutionsByRatio',
      'route_makes_none',
      'Invalid resolutionsByRatio: the route makes none of the pairs this model offers; set resolutionsByRatio in the same edit',
    );
  }
  return kept;
}
