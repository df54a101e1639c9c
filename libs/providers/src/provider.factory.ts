import type { ProviderContext, ProviderTypeDefinition, QueueImageProvider } from './provider-type';
import { ImageProvider, ProviderError } from './render.types';
import { ProviderRoute, providerType, requiredKey, withDefaults } from './provider-types.registry';
import { routeBatchSettings, UpstreamBatchApi } from './upstream-batch';

export interface ProviderFactoryDeps extends Omit<ProviderContext, 'apiKey'> {
  /**
   * The upstream key held by the named environment variable, or null when it is not set.
   * Supplied by the config lib, which is the only code that reads the environment.
   */
  apiKey: (envName: string) => string | null;
}

/**
 * The one path every factory below takes: the route's type, the route with its defaults, and
 * the context with the key looked up. A type that calls no upstream takes the key ''; one
 * that does needs its key set and not empty, else the answer is the one not_configured
 * error (an operator must set the variable; the task is not at fault).
 */
function prepare(
  route: ProviderRoute,
  deps: ProviderFactoryDeps,
): { route: ProviderRoute; context: ProviderContext } | { missing: string } {
  const envName = requiredKey(route);
  const apiKey = envName === null ? '' : deps.apiKey(envName);
  if (!apiKey && envName !== null) return { missing: envName };
  const { apiKey: _lookup, ...rest } = deps;
  return { route: withDefaults(route), context: { ...rest, apiKey: apiKey ?? '' } };
}

/** The error of a route whose key variable is not set. */
function notConfigured(envName: string): ProviderError {
  return new ProviderError('not_configured', `The image provider is not configured: ${envName} is not set`);
}

function typeOf(route: ProviderRoute): ProviderTypeDefinition | undefined {
  return providerType((route as { type?: unknown })?.type);
}

/**
 * The provider for a synchronous route (its type's `create`, with defaults applied and the
 * key looked up). Throws for a type Kiln does not know, and for a queue type, which the
 * generator runs through submit/poll/fetch rather than one render call. A missing key gives
 * a provider whose every render fails with that not_configured error: the generator meets it
 * where it meets any render's failure.
 */
export function createProvider(route: ProviderRoute, deps: ProviderFactoryDeps): ImageProvider {
  const def = typeOf(route);
  if (!def) throw new Error(`Unknown provider route type: ${JSON.stringify((route as { type?: unknown })?.type)}`);
  if (def.mode !== 'sync') throw new Error(`Provider route type ${def.type} is a queue type: it has no single render call`);
  const prepared = prepare(route, deps);
  if ('missing' in prepared) return new UnconfiguredProvider(prepared.missing);
  return def.create(prepared.route, prepared.context);
}

/** The provider for a queue route: submit, poll, fetch. A missing key throws not_configured (the task fails, refunded). */
export function createQueueProvider(route: ProviderRoute, deps: ProviderFactoryDeps): QueueImageProvider {
  const def = typeOf(route);
  if (!def || def.mode !== 'queue')
    throw new Error(`Provider route type ${JSON.stringify((route as { type?: unknown })?.type)} is not a queue type`);
  const prepared = prepare(route, deps);
  if ('missing' in prepared) throw notConfigured(prepared.missing);
  return def.create(prepared.route, prepared.context);
}

/** Fails each render with the not_configured error of the route's missing key. */
class UnconfiguredProvider implements ImageProvider {
  constructor(private readonly envName: string) {}

  render(): Promise<never> {
    return Promise.reject(notConfigured(this.envName));
  }
}

/**
 * The batch API (economy tier) of a route whose type has one and whose `batch` setting is
 * enabled; null otherwise (its economy tasks then wait, and are refunded when their window
 * ends). A missing key throws not_configured, as for queue routes.
 */
export function createBatchApi(route: ProviderRoute, deps: ProviderFactoryDeps): UpstreamBatchApi | null {
  const def = typeOf(route);
  const settings = routeBatchSettings(route);
  if (!def?.batch || !settings) return null;
  const prepared = prepare(route, deps);
  if ('missing' in prepared) throw notConfigured(prepared.missing);
  return def.batch.createBatchApi(prepared.route, settings, prepared.context);
}

/** Whether a route can run the economy tier: its type has a batch API and its `batch` setting is enabled. */
export function hasBatchApi(route: ProviderRoute): boolean {
  return typeOf(route)?.batch !== undefined && routeBatchSettings(route) !== null;
}
