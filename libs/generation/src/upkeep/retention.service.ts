import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { StorageDriver, retentionCutoff, sweepObjects } from '@app/storage';
import { clearPreviewUrls, clearResultKeys, selectExpiredPreviews, selectExpiredResults } from '@app/tasks';
import { UploadsService } from '@app/uploads';

export interface RetentionReport {
  uploads: number;
  results: number;
  previews: number;
}

/** Objects removed per statement; a sweep goes on until nothing is older than the cutoff. */
const CHUNK = 200;

/**
 * Deletes what RETENTION_DAYS promises to keep no longer (docs/api.md#result-urls-and-retention: URLs are stable for
 * the retention period): uploads (UploadsService.purgeExpired), the images of tasks finished
 * before the cutoff, and the previews of batches finished before it (sweepObjects: objects
 * first, then the rows' keys, so an interrupted sweep is redone by the next). A result's row
 * keeps its URL (which then answers 404) and loses its `result_key`; a batch's `previewUrl`
 * becomes null. Safe to run on several replicas at once: every step is idempotent.
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
    const cutoff = retentionCutoff(this.config.storage.retentionDays, now);
    const uploads = await this.uploads.purgeExpired(now);
    const results = await this.sweepRows(
      'result',
      () => selectExpiredResults(this.db, cutoff, CHUNK),
      (ids) => clearResultKeys(this.db, ids),
    );
    // A preview URL of another storage (none this driver can name) is cleared without a removal.
    const previews = await this.sweepRows(
      'preview',
      async () =>
        (await selectExpiredPreviews(this.db, cutoff, CHUNK)).map((r) => ({ id: r.id, key: this.storage.keyFromPublicUrl(r.url) })),
      (ids) => clearPreviewUrls(this.db, ids),
    );
    const report = { uploads, results, previews };
    if (uploads + results + previews > 0) this.logger.log(`Retention sweep removed ${JSON.stringify(report)}`);
    return report;
  }

  /** sweepObjects over the objects `select` finds, forgotten by `clear`. */
  private async sweepRows(
    what: string,
    select: () => Promise<{ id: string; key: string | null }[]>,
    clear: (ids: string[]) => Promise<unknown>,
  ): Promise<number> {
    const { swept, failed, failure } = await sweepObjects(this.storage, CHUNK, select, clear);
    if (failed > 0) this.logger.warn({ err: failure }, `Could not remove ${failed} expired ${what} objects`);
    return swept;
  }
}
