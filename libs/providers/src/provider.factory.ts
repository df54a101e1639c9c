import { BuiltinProvider } from './builtin.provider';
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
  /** Upstream timeout when the route does not set its own. */
  timeoutMs: number;
  /** UPSTREAM_ALLOW_PRIVATE and UPSTREAM_MAX_IMAGE_BYTES (see OpenAiProviderConfig). */
  upstream: { allowPrivate: boolean; maxImageBytes: number };
  /** Only for tests: makes simulated routes deterministic. */
  random?: () => number;
}

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
