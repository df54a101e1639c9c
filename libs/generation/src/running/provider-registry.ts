import { Inject, Injectable } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import {
  BatchObjectStore,
  createBatchApi,
  createProvider,
  createQueueProvider,
  ImageProvider,
  isProviderError,
  ProviderFactoryDeps,
  providerType,
  ProviderRoute,
  QueueImageProvider,
  UpstreamBatchApi,
} from '@app/providers';
import { StorageDriver, StorageObjectNotFoundError } from '@app/storage';
import { TaskFailure } from './task-failure';

/** Where local batch APIs keep their state in object storage (docs/operations.md). */
export const UPSTREAM_BATCH_PREFIX = 'upstream-batches';

/**
 * The image provider for a batch's routing snapshot, built with what the configuration holds
 * for it (upstream keys by environment variable name, timeouts, what upstreams may answer).
 */
@Injectable()
export class ProviderRegistry {
  /** A local batch API's state (the simulated type's): Kiln's object storage under a prefix of its own, never swept. */
  private readonly batchObjects: BatchObjectStore;

  constructor(
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    storage: StorageDriver,
  ) {
    this.batchObjects = {
      put: (key, body) => storage.put(`${UPSTREAM_BATCH_PREFIX}/${key}`, body, 'application/octet-stream'),
      get: (key) =>
        storage.get(`${UPSTREAM_BATCH_PREFIX}/${key}`).catch((err) => {
          if (err instanceof StorageObjectNotFoundError) return null;
          throw err;
        }),
      remove: (key) => storage.remove(`${UPSTREAM_BATCH_PREFIX}/${key}`),
    };
  }

  /**
   * The batch API (economy tier) of a route whose type has one and whose `batch` setting is
   * enabled, else null. A missing key throws not_configured.
   */
  forBatchRoute(route: ProviderRoute): UpstreamBatchApi | null {
    return createBatchApi(route, {
      ...this.deps(),
      batchObjects: this.batchObjects,
      simulatedBatchHangAt: this.config.generator.simulatedBatchHangAt,
    });
  }

  /**
   * The queue provider (submit, poll, fetch) for a route of a queue type, null for
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
      throw new TaskFailure(
        `This model's provider routing is not usable (${String((route as { type?: unknown })?.type)})`,
        'provider_not_configured',
      );
    }
  }

  private deps(): ProviderFactoryDeps {
    return {
      apiKey: (envName) => this.apiKey(envName),
      timeoutMs: this.config.generator.providerTimeoutMs,
      upstream: this.config.upstream,
    };
  }

  /** The value of an upstream key variable, null when unset. */
  private apiKey(envName: string): string | null {
    return this.config.providerApiKeys?.[envName] ?? null;
  }
}
