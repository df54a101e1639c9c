import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { StorageDriver, sweepUnreferenced } from '@app/storage';

export interface OrphanReport {
  results: number;
  previews: number;
}

/** Keys looked up per statement. */
const CHUNK = 200;

/**
 * Removes result and preview objects no row references, once older than ORPHAN_GRACE_MS:
 * what a crash between storing an image and recording it leaves behind (an attempt that
 * runs the task again overwrites its result, so mostly previews, and the results of tasks
 * that then failed for good). A result is kept while its row names it, or while its task
 * (found by the key's token) is unfinished and may still record it; a preview while a batch
 * names it. Idempotent, so replicas may overlap.
 */
@Injectable()
export class OrphanSweepService {
  private readonly logger = new Logger(OrphanSweepService.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly storage: StorageDriver,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  async sweep(now: Date = new Date()): Promise<OrphanReport> {
    const olderThan = new Date(now.getTime() - this.config.storage.orphanGraceMs);
    const results = await sweepUnreferenced(this.storage, {
      prefix: 'results',
      olderThan,
      chunk: CHUNK,
      referenced: (keys) => this.referencedResults(keys),
    });
    const previews = await sweepUnreferenced(this.storage, {
      prefix: 'previews',
      olderThan,
      chunk: CHUNK,
      referenced: (keys) => this.referencedPreviews(keys),
    });
    const report = { results, previews };
    if (results + previews > 0) this.logger.log(`Orphan sweep removed ${JSON.stringify(report)}`);
    return report;
  }

  private async referencedResults(keys: string[]): Promise<Set<string>> {
    const tokenOf = (key: string): string => key.split('/')[1] ?? '';
    const rows: { key: string }[] = await this.db.query(
      `SELECT result_key AS key FROM tasks WHERE result_key = ANY($1::text[])
       UNION
       SELECT k.key FROM unnest($1::text[], $2::text[]) AS k(key, token)
         JOIN tasks t ON t.result_token = k.token AND t.status IN ('pending', 'queued', 'running')`,
      [keys, keys.map(tokenOf)],
    );
    return new Set(rows.map((r) => r.key));
  }

  /**
   * By URL first (indexed). A preview that no URL matches is looked for once more by its key
   * alone, so a batch whose URL was made under another public base URL keeps its preview;
   * only the few real orphans pay for that scan.
   */
  private async referencedPreviews(keys: string[]): Promise<Set<string>> {
    const urls = keys.map((key) => this.storage.publicUrl(key));
    const rows: { url: string }[] = await this.db.query(`SELECT preview_url AS url FROM batches WHERE preview_url = ANY($1::text[])`, [
      urls,
    ]);
    const found = new Set(rows.map((r) => r.url));
    const keep = new Set(keys.filter((_, i) => found.has(urls[i])));
    const unmatched = keys.filter((key) => !keep.has(key));
    if (unmatched.length === 0) return keep;
    const elsewhere: { key: string }[] = await this.db.query(
      `SELECT k.key FROM unnest($1::text[]) AS k(key)
        WHERE EXISTS (SELECT 1 FROM batches b WHERE b.preview_url IS NOT NULL AND right(b.preview_url, length(k.key) + 1) = '/' || k.key)`,
      [unmatched],
    );
    for (const { key } of elsewhere) keep.add(key);
    return keep;
  }
}
