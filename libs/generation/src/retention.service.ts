import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { StorageDriver } from '@app/storage';
import { UploadsService } from '@app/uploads';

export interface RetentionReport {
  uploads: number;
  results: number;
  previews: number;
}

const DAY_MS = 24 * 60 * 60 * 1000;
/** Objects removed per statement; a sweep goes on until nothing is older than the cutoff. */
const CHUNK = 200;

/**
 * Deletes what RETENTION_DAYS promises to keep no longer (decisions.md 6: URLs are stable for
 * the retention period): uploads (UploadsService.purgeExpired), the images of tasks finished
 * before the cutoff, and the previews of batches finished before it. Objects go first and the
 * database second, so a crash midway leaves work the next sweep redoes, never a row pointing
 * at nothing it still counts as kept. A result's row keeps its URL (which then answers 404)
 * and loses its `result_key`; a batch's `previewUrl` becomes null. Safe to run on several
 * replicas at once: every step is idempotent.
 */
@Injectable()
export class RetentionService {
  private readonly logger = new Logger(RetentionService.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly storage: StorageDriver,
    private readonly uploads: UploadsService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  async sweep(now: Date = new Date()): Promise<RetentionReport> {
    const cutoff = new Date(now.getTime() - this.config.storage.retentionDays * DAY_MS);
    const uploads = await this.uploads.purgeExpired(now);
    const results = await this.sweepObjects(
      `SELECT id, result_key AS key FROM tasks WHERE result_key IS NOT NULL AND finished_at < $1 ORDER BY finished_at LIMIT ${CHUNK}`,
      `UPDATE tasks SET result_key = NULL WHERE id = ANY($1::uuid[])`,
      cutoff,
      (key) => key,
    );
    const previews = await this.sweepObjects(
      `SELECT id, preview_url AS key FROM batches WHERE preview_url IS NOT NULL AND finished_at < $1 ORDER BY finished_at LIMIT ${CHUNK}`,
      `UPDATE batches SET preview_url = NULL WHERE id = ANY($1::uuid[])`,
      cutoff,
      (url) => this.storage.keyFromPublicUrl(url),
    );
    const report = { uploads, results, previews };
    if (uploads + results + previews > 0) this.logger.log(`Retention sweep removed ${JSON.stringify(report)}`);
    return report;
  }

  /**
   * Removes the objects of the rows `select` finds, chunk by chunk, and clears them with
   * `clear`. A row whose object cannot be named (a preview URL of another storage) is cleared
   * without a removal. Stops at the first chunk storage fails on; the next sweep retries it.
   */
  private async sweepObjects(
    select: string,
    clear: string,
    cutoff: Date,
    keyOf: (value: string) => string | null,
  ): Promise<number> {
    let swept = 0;
    for (;;) {
      const rows: { id: string; key: string }[] = await this.db.query(select, [cutoff]);
      if (rows.length === 0) return swept;
      const removals = await Promise.allSettled(
        rows.map(async (row) => {
          const key = keyOf(row.key);
          if (key) await this.storage.remove(key);
        }),
      );
      const cleared = rows.filter((_, i) => removals[i].status === 'fulfilled').map((row) => row.id);
      if (cleared.length > 0) await this.db.query(clear, [cleared]);
      swept += cleared.length;
      if (cleared.length < rows.length) {
        const failure = removals.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        this.logger.warn({ err: failure?.reason }, `Could not remove ${rows.length - cleared.length} expired objects`);
        return swept;
      }
      if (rows.length < CHUNK) return swept;
    }
  }
}
