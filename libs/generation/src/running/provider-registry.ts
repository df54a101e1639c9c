import { Inject, Injectable } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { createProvider, createQueueProvider, ImageProvider, isProviderError, ProviderFactoryDeps, providerType, ProviderRoute, QueueImageProvider } from '@app/providers';
import { TaskFailure } from './task-failure';

/**
 * The image provider for a batch's routing snapshot, built with what the configuration holds
 * for it (upstream keys by environment variable name, timeouts, what upstreams may answer).
 */
@Injectable()
export class ProviderRegistry {
  constructor(@Inject(KILN_CONFIG) private readonly config: KilnConfig) {}

  /**
   * The queue provider (submit, poll, fetch) for a queue route (fal, replicate, bfl), null for
   * any other. A missing key throws not_configured (the task fails, refunded).
   */
  forQueueRoute(route: ProviderRoute): QueueImageProvider | null {
    if (providerType((route as { type?: unknown })?.type)?.mode !== 'queue') return null;
    return createQueueProvider(route, this.deps());
  }

  /** Throws a TaskFailure (the task fails at once, refunded) for a route that makes no sense. */
  forRoute(route: ProviderRoute): ImageProvider {
    try {
      return createProvider(route, this.deps());
    } catch (err) {
      if (isProviderError(err)) throw err;
      throw new TaskFailure(`This model's provider routing is not usable (${String((route as { type?: unknown })?.type)})`, 'provider_not_configured');
    }
  }

  private deps(): ProviderFactoryDeps {
    return { apiKey: (envName) => this.apiKey(envName), timeoutMs: this.config.generator.providerTimeoutMs, upstream: this.config.upstream };
  }

  /**
   * The value of an upstream key variable, null when unset. OPENAI_API_KEY keeps its own
   * config field (config.openaiApiKey predates the generic map and tests set it alone).
   */
  private apiKey(envName: string): string | null {
    return envName === 'OPENAI_API_KEY' ? this.config.openaiApiKey : (this.config.providerApiKeys?.[envName] ?? null);
  }
}
