import { DataSource } from 'typeorm';
import { ProviderRoute, queryRows } from '@app/database';

/** Where a batch's tasks go: its model and the provider route snapshotted at its creation. */
export interface BatchRoute {
  model: string;
  provider: ProviderRoute;
  /** The batch's chain of routes; null when it rides on its provider alone. */
  routes: ProviderRoute[] | null;
}

/** Batches are many over a generator's life; a map past this size starts again. */
const MAX_CACHED = 10_000;

/**
 * The routes of batches, read once per batch and kept: a batch's model and provider snapshot
 * never change after its creation, so a worker may take its slot by them before it claims a
 * task (RunSyncRender.slotFirst). Concurrent lookups of one batch share one read.
 */
export class BatchRoutes {
  private readonly known = new Map<string, Promise<BatchRoute | null>>();

  constructor(private readonly db: DataSource) {}

  /** The batch's route; null when the batch does not exist. A failed read is not kept. */
  of(batchId: string): Promise<BatchRoute | null> {
    let route = this.known.get(batchId);
    if (!route) {
      if (this.known.size >= MAX_CACHED) this.known.clear();
      route = this.read(batchId);
      this.known.set(batchId, route);
      // A missing batch or a failed read is asked again next time.
      route.then(
        (found) => found ?? this.known.delete(batchId),
        () => this.known.delete(batchId),
      );
    }
    return route;
  }

  private async read(batchId: string): Promise<BatchRoute | null> {
    const [row] = await queryRows<{ model: string; provider: ProviderRoute; routes: ProviderRoute[] | null }>(
      this.db,
      'SELECT model, provider, routes FROM batches WHERE id = $1',
      [batchId],
    );
    return row ? { model: row.model, provider: row.provider, routes: row.routes } : null;
  }
}
