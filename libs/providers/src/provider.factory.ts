import { BFL_DEFAULTS, BflProvider } from './bfl/bfl.provider';
import { BuiltinProvider } from './builtin.provider';
import { FAL_DEFAULTS, FalProvider } from './fal/fal.provider';
import { QueueProviderDeps } from './queue/queue-route';
import { REPLICATE_DEFAULTS, ReplicateProvider } from './replicate/replicate.provider';
import { OpenAiProvider } from './openai.provider';
import { ImageProvider, ProviderError, ProviderRoute } from './provider.types';
import { SimulatedProvider } from './simulated.provider';

export interface ProviderFactoryDeps {
  /**
   * The upstream key held by the named environment variable (undefined: the default,
   * OPENAI_API_KEY), or null when it is not set. Supplied by the config lib, which is the
   * only code that reads the environment.
   */
  openaiApiKey: (envName?: string) => string | null;
  /** The key held by the named variable (FAL_KEY, REPLICATE_API_TOKEN, BFL_API_KEY, or a route's own), null when unset. */
  apiKey?: (envName: string) => string | null;
  /** Upstream timeout when the route does not set its own. */
  timeoutMs: number;
  /** UPSTREAM_ALLOW_PRIVATE and UPSTREAM_MAX_IMAGE_BYTES (see OpenAiProviderConfig). */
  upstream: { allowPrivate: boolean; maxImageBytes: number };
  /** Only for tests: makes simulated routes deterministic. */
  random?: () => number;
}

/** The variable each queue type's key is read from when the route names none. */
export const QUEUE_KEY_VARIABLE = {
  fal: FAL_DEFAULTS.apiKeyEnv,
  replicate: REPLICATE_DEFAULTS.apiKeyEnv,
  bfl: BFL_DEFAULTS.apiKeyEnv,
} as const;

/** The builtin renderer holds no state, so one instance serves every model routed to it. */
const builtin = new BuiltinProvider();

export function createProvider(route: ProviderRoute, deps: ProviderFactoryDeps): ImageProvider {
  switch (route.type) {
    case 'builtin':
      return builtin;
    case 'openai': {
      const apiKey = deps.openaiApiKey(route.apiKeyEnv);
      if (!apiKey) return new UnconfiguredProvider(route.apiKeyEnv ?? 'OPENAI_API_KEY');
      return new OpenAiProvider({
        baseUrl: route.baseUrl,
        apiKey,
        model: route.model,
        sizeMap: route.sizeMap,
        timeoutMs: route.timeoutMs ?? deps.timeoutMs,
        allowPrivate: deps.upstream.allowPrivate,
        maxImageBytes: deps.upstream.maxImageBytes,
      });
    }
    case 'simulated':
      return new SimulatedProvider(
        { latencyMs: route.latencyMs, failureRate: route.failureRate, rateLimitRate: route.rateLimitRate },
        deps.random,
      );
    case 'fal':
    case 'replicate':
    case 'bfl': {
      const envName = route.apiKeyEnv ?? QUEUE_KEY_VARIABLE[route.type];
      const apiKey = deps.apiKey?.(envName) ?? null;
      if (!apiKey) return new UnconfiguredProvider(envName);
      const queueDeps: QueueProviderDeps = {
        apiKey,
        timeoutMs: route.timeoutMs ?? deps.timeoutMs,
        allowPrivate: deps.upstream.allowPrivate,
        maxImageBytes: deps.upstream.maxImageBytes,
      };
      if (route.type === 'fal') return new FalProvider(route, queueDeps);
      if (route.type === 'replicate') return new ReplicateProvider(route, queueDeps);
      return new BflProvider(route, queueDeps);
    }
    default: {
      const unknown: never = route;
      throw new Error(`Unknown provider route type: ${JSON.stringify((unknown as { type?: unknown }).type)}`);
    }
  }
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
