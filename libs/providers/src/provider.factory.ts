import type { ProviderContext, QueueImageProvider } from './provider-type';
import { ImageProvider, ProviderError } from './provider.types';
import { ProviderRoute, providerType, requiredKey, withDefaults } from './registry';
import { routeBatchSettings, UpstreamBatchApi } from './upstream-batch';

export interface ProviderFactoryDeps extends Omit<ProviderContext, 'apiKey'> {
  /**
   * The upstream key held by the named environment variable, or null when it is not set.
   * Supplied by the config lib, which is the only code that reads the environment.
   */
  apiKey: (envName: string) => string | null;
}

/**
 * The provider for a synchronous route (its type's `create`, with defaults applied and the
 * key looked up). Throws for a type Kiln does not know, and for a queue type, which the
 * generator runs through submit/poll/fetch rather than one render call.
 */
export function createProvider(route: ProviderRoute, deps: ProviderFactoryDeps): ImageProvider {
  const def = providerType((route as { type?: unknown })?.type);
  if (!def) throw new Error(`Unknown provider route type: ${JSON.stringify((route as { type?: unknown })?.type)}`);
  if (def.mode !== 'sync') throw new Error(`Provider route type ${def.type} is a queue type: it has no single render call`);
  const envName = requiredKey(route);
  const apiKey = envName ? deps.apiKey(envName) : '';
  if (apiKey === null || (envName && !apiKey)) return new UnconfiguredProvider(envName!);
  const { apiKey: _lookup, ...rest } = deps;
  return def.create(withDefaults(route), { ...rest, apiKey });
}

/**
 * The provider for a queue route (fal, replicate, bfl): submit, poll, fetch. A missing key
 * throws not_configured (the task fails, refunded: an operator must set it).
 */
export function createQueueProvider(route: ProviderRoute, deps: ProviderFactoryDeps): QueueImageProvider {
  const def = providerType((route as { type?: unknown })?.type);
  if (!def || def.mode !== 'queue') throw new Error(`Provider route type ${JSON.stringify((route as { type?: unknown })?.type)} is not a queue type`);
  const envName = requiredKey(route);
  const apiKey = envName ? deps.apiKey(envName) : null;
  if (!apiKey) throw new ProviderError('not_configured', `The image provider is not configured: ${envName} is not set`);
  const { apiKey: _lookup, ...rest } = deps;
  return def.create(withDefaults(route), { ...rest, apiKey });
}

/**
 * A route whose key is missing fails each render with a clear, non-retryable message rather
 * than at creation: one misconfigured model must not stop the generator serving the others.
 */
class UnconfiguredProvider implements ImageProvider {
  constructor(private readonly envName: string) {}

  async render(): Promise<never> {
    throw new ProviderError('not_configured', `The image provider is not configured: ${this.envName} is not set`);
  }
}

/**
 * The batch API (economy tier) of a route whose type has one and whose `batch` setting is
 * enabled; null otherwise (its economy tasks then wait, and are refunded when their window
 * ends). A missing key throws not_configured, as for queue routes.
 */
export function createBatchApi(route: ProviderRoute, deps: ProviderFactoryDeps): UpstreamBatchApi | null {
  const def = providerType((route as { type?: unknown })?.type);
  const settings = routeBatchSettings(route);
  if (!def?.batch || !settings) return null;
  const envName = requiredKey(route);
  const apiKey = envName ? deps.apiKey(envName) : '';
  if (envName && !apiKey) throw new ProviderError('not_configured', `The image provider is not configured: ${envName} is not set`);
  const { apiKey: _lookup, ...rest } = deps;
  return def.batch.createBatchApi(withDefaults(route), settings, { ...rest, apiKey: apiKey ?? '' });
}

/** Whether a route can run the economy tier: its type has a batch API and its `batch` setting is enabled. */
export function hasBatchApi(route: ProviderRoute): boolean {
  return providerType((route as { type?: unknown })?.type)?.batch !== undefined && routeBatchSettings(route) !== null;
}
