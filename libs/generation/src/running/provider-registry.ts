import { Inject, Injectable } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { createProvider, ImageProvider, ProviderRoute } from '@app/providers';
import { TaskFailure } from './task-failure';

/**
 * The image provider for a batch's routing snapshot, built with what the configuration holds
 * for it (upstream keys by environment variable name, timeouts, what upstreams may answer).
 */
@Injectable()
export class ProviderRegistry {
  constructor(@Inject(KILN_CONFIG) private readonly config: KilnConfig) {}

  /** Throws a TaskFailure (the task fails at once, refunded) for a route that makes no sense. */
  forRoute(route: ProviderRoute): ImageProvider {
    try {
      return createProvider(route, {
        openaiApiKey: (envName) => this.apiKey(envName),
        apiKey: (envName) => this.apiKey(envName),
        timeoutMs: this.config.generator.providerTimeoutMs,
        upstream: this.config.upstream,
      });
    } catch {
      throw new TaskFailure(`This model's provider routing is not usable (${String((route as { type?: unknown })?.type)})`, 'provider_not_configured');
    }
  }

  /** OPENAI_API_KEY unless the route names another variable (FAL_KEY and the like); null when it is not set. */
  private apiKey(envName: string | undefined): string | null {
    return !envName || envName === 'OPENAI_API_KEY' ? this.config.openaiApiKey : (this.config.providerApiKeys?.[envName] ?? null);
  }
}
