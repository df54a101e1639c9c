import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Readable } from 'node:stream';
import { DataSource } from 'typeorm';
import { isUuid, queryRows } from '@app/database';
import { notFound } from '@app/errors';
import { CONTENT_TYPE_OF, RenderFormat } from '@app/providers';
import { StorageDriver, StorageObjectNotFoundError } from '@app/storage';

/** One image of a batch, opened for a download. */
export interface TaskFile {
  body: Readable;
  contentType: string;
  /** `kiln-<batch id>-<task index>.<extension>`, as the web app names it. */
  fileName: string;
}

/**
 * A succeeded task's stored image, read through Kiln for a holder who is signed in: the
 * web app's Download. A result URL on another origin (a MinIO bucket, a CDN) cannot be
 * downloaded by a link (browsers ignore `download` across origins and show the image), and
 * this works for every storage driver alike. Found only on the caller's account; anything
 * else (another account's, not succeeded, removed by retention, a malformed id) is not_found.
 */
@Injectable()
export class TaskFileService {
  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly storage: StorageDriver,
  ) {}

  async open(accountId: string, batchId: string, taskId: string): Promise<TaskFile> {
    if (!isUuid(batchId) || !isUuid(taskId)) throw notFound('Image');
    const [row] = await queryRows<{ key: string; seq: number }>(
      this.db,
      `SELECT t.result_key AS key, t.seq
         FROM tasks t JOIN batches b ON b.id = t.batch_id
        WHERE t.id = $1 AND t.batch_id = $2 AND b.account_id = $3 AND t.status = 'succeeded' AND t.result_key IS NOT NULL`,
      [taskId, batchId, accountId],
    );
    if (!row) throw notFound('Image');
    let body: Readable;
    try {
      body = await this.storage.openRead(row.key);
    } catch (err) {
      if (err instanceof StorageObjectNotFoundError) throw notFound('Image');
      throw err;
    }
    const extension = row.key.includes('.') ? row.key.slice(row.key.lastIndexOf('.') + 1) : 'png';
    // The task's index in its batch is its seq + 1 (taskPosition), as the API shows it.
    const index = row.seq + 1;
    // Results are stored as .png, .jpg or .webp (the success's write names them).
    const format = (extension === 'jpg' ? 'jpeg' : extension) as RenderFormat;
    return { body, contentType: CONTENT_TYPE_OF[format] ?? 'application/octet-stream', fileName: `kiln-${batchId}-${index}.${extension}` };
  }
}
