import { Injectable, Logger, OnModuleDestroy } from '@nestjs/common';
import { DataSource, EntityManager } from 'typeorm';
import { RedisService } from '@app/redis';

/**
 * How a batch's change is announced: after a write that bumped its version commits, its id is
 * published on the batch's own channel. Held long polls (GET /v1/batches/{id} with
 * `Prefer: wait`) subscribe to it, so they wait on Redis, not on PostgreSQL. An announcement
 * is a hint: a lost one makes a held poll answer later (at its deadline, after re-reading
 * the version), never wrongly.
 */
export function batchChangeChannel(redis: Pick<RedisService, 'key'>, batchId: string): string {
  return redis.key('batch-changed', batchId);
}

/**
 * How long announcements gather before they go out. A busy generator records a group of
 * tasks every few milliseconds, most groups touching the same handful of batches: publishing
 * each group's batches at once cost about 1.6 PUBLISH per task (bench/findings.md,
 * 2026-11-25 evening). Gathered for this long, a batch changed by several groups is announced
 * once; a held poll answers at most this much later.
 */
export const ANNOUNCE_GATHER_MS = 10;

@Injectable()
export class BatchChangePublisher implements OnModuleDestroy {
  private readonly logger = new Logger(BatchChangePublisher.name);
  private gathered = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly redis: RedisService) {}

  /** Fire-and-forget: published within ANNOUNCE_GATHER_MS, one round trip for any number of batches; never throws. */
  announce(batchIds: Iterable<string>): void {
    for (const id of batchIds) this.gathered.add(id);
    if (this.gathered.size === 0 || this.timer) return;
    this.timer = setTimeout(() => this.flush(), ANNOUNCE_GATHER_MS);
    // An announcement is a hint: it never keeps a process alive.
    this.timer.unref();
  }

  /**
   * A batch that has just finished: published now, with whatever has gathered, not after the
   * gather. A client waiting for the whole batch (the OpenAI door, a held poll of a 1-image
   * batch) answers on this announcement, and a batch finishes once, so this costs at most one
   * round trip per batch.
   */
  announceFinished(batchIds: Iterable<string>): void {
    for (const id of batchIds) this.gathered.add(id);
    if (this.gathered.size > 0) this.flush();
  }

  /** Publishes what has gathered now (also on shutdown, so a stopping process's last changes are not held back). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const ids = [...this.gathered];
    this.gathered = new Set();
    if (ids.length === 0) return;
    const pipeline = this.redis.client.pipeline();
    for (const id of ids) pipeline.publish(batchChangeChannel(this.redis, id), '1');
    pipeline.exec().catch((err: Error) => this.logger.debug(`Could not announce ${ids.length} batch change(s): ${err.message}`));
  }

  onModuleDestroy(): void {
    this.flush();
  }
}

/**
 * Bumps the versions of batches whose tasks a statement changed without touching the batch
 * rows (dispatch's pending <-> queued). Runs after that statement, so a reader may see the new
 * tasks under the old version for a moment: it then answers 200 once more, never a stale 304.
 * Locks in id order, like every grouped write, so it cannot deadlock with them.
 */
export async function bumpBatchVersions(db: DataSource | EntityManager, batchIds: readonly string[]): Promise<void> {
  if (batchIds.length === 0) return;
  await db.query(
    `UPDATE batches SET version = version + 1
      WHERE id IN (SELECT id FROM batches WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE)`,
    [[...new Set(batchIds)]],
  );
}
