import { Inject, Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import archiver, { Archiver } from 'archiver';
import type { Readable, Writable } from 'node:stream';
import { DataSource } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';
import { StorageDriver, StorageObjectNotFoundError } from '@app/storage';
import { BatchView, selectResultKeys } from '@app/tasks';
import { BatchesService, BatchTask } from './batches.service';

/**
 * The zip's stream buffers at most this much ahead of a slow client (archiver's default is
 * 1 MiB per stream, several streams deep): with 20 archives at once that buffering was most
 * of the api's growth (bench/: archives).
 */
const ARCHIVE_HIGH_WATER_MARK = 64 * 1024;
/** Retry-After when the archive caps are reached: an archive of a large batch takes seconds. */
export const ARCHIVE_RETRY_AFTER_S = 10;

/** Longest prompt slug in an image's name inside an archive. */
const MAX_SLUG_LENGTH = 40;

/**
 * The prompt as a file-name part: lower-cased, every run of characters other than a-z and
 * 0-9 turned into one `-`, no `-` at either end, at most 40 characters; `image` when nothing
 * is left (a prompt in another script, say).
 */
export function promptSlug(prompt: string): string {
  const slug = prompt
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, MAX_SLUG_LENGTH)
    .replace(/-+$/, '');
  return slug || 'image';
}

/** `images/<index, 4+ digits>-<slug>.<ext>`: unique within the batch (the index) and readable (the slug). */
export function archiveImageName(index: number, prompt: string, extension: string): string {
  return `images/${String(index).padStart(4, '0')}-${promptSlug(prompt)}.${extension}`;
}

/** A batch ready to be written as a zip: found on the account, its tasks read. */
export interface BatchArchive {
  batch: BatchView;
  tasks: BatchTask[];
  /** Each task's stored result object, or null (none yet, or removed by retention). */
  resultKeys: Map<string, string | null>;
  /** Frees the archive's slot (write() does, once the zip ended or the client left). */
  release: () => void;
}

/** How the caller shows a batch and a task (the wire shapes live with the HTTP layer). */
export interface ArchiveJson {
  batch: (batch: BatchView) => unknown;
  task: (task: BatchTask) => Record<string, unknown>;
}

/**
 * A batch's images and a manifest as one zip, streamed: images are read from storage one at
 * a time, each only as fast as the client takes the bytes, so memory does not grow with the
 * batch. Images are stored, not deflated (PNG, JPEG and WebP are compressed already). The
 * manifest comes last because it says which images are in the archive: an image removed by
 * retention, or not there for any other reason, is left out with `file: null`.
 */
@Injectable()
export class BatchArchiveService {
  private readonly logger = new Logger(BatchArchiveService.name);
  /** Archives being streamed by this process, in all and per account. */
  private streaming = 0;
  private readonly streamingFor = new Map<string, number>();

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly batches: BatchesService,
    private readonly storage: StorageDriver,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /**
   * Refuses before a byte is written: not_found, or when this process already streams
   * ARCHIVE_MAX_CONCURRENT archives (service_unavailable) or the account ARCHIVE_MAX_PER_ACCOUNT
   * (rate_limited), both with retryAfter. A batch still running gives what has succeeded so far.
   */
  async open(accountId: string, batchId: string): Promise<BatchArchive> {
    const { batch, tasks } = await this.batches.detail(accountId, batchId);
    const release = this.takeSlot(accountId);
    try {
      return { batch, tasks, resultKeys: await selectResultKeys(this.db, batch.id), release };
    } catch (err) {
      release();
      throw err;
    }
  }

  /** Archives being streamed by this process now (tests, metrics). */
  get inProgress(): number {
    return this.streaming;
  }

  private takeSlot(accountId: string): () => void {
    const { archiveMaxConcurrent, archiveMaxPerAccount } = this.config.storage;
    const mine = this.streamingFor.get(accountId) ?? 0;
    if (mine >= archiveMaxPerAccount) {
      throw new KilnError(
        ErrorCode.RateLimited,
        `At most ${archiveMaxPerAccount} archives at once per account; retry after the Retry-After delay`,
        {
          retryAfter: ARCHIVE_RETRY_AFTER_S,
          limit: archiveMaxPerAccount,
        },
      );
    }
    if (this.streaming >= archiveMaxConcurrent) {
      throw new KilnError(
        ErrorCode.ServiceUnavailable,
        'The server is streaming as many archives as it can; retry after the Retry-After delay',
        {
          retryAfter: ARCHIVE_RETRY_AFTER_S,
        },
      );
    }
    this.streaming++;
    this.streamingFor.set(accountId, mine + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.streaming--;
      const left = (this.streamingFor.get(accountId) ?? 1) - 1;
      if (left <= 0) this.streamingFor.delete(accountId);
      else this.streamingFor.set(accountId, left);
    };
  }

  /**
   * Writes the zip to `out` and ends it. On a storage failure midway the zip is aborted and
   * `out` destroyed, so the client sees a broken transfer rather than a zip that looks whole;
   * the error is then rethrown for the log.
   */
  async write(archive: BatchArchive, out: Writable, json: ArchiveJson): Promise<void> {
    try {
      await this.stream(archive, out, json);
    } finally {
      archive.release();
    }
  }

  private async stream(archive: BatchArchive, out: Writable, json: ArchiveJson): Promise<void> {
    const zip = archiver('zip', { store: true, highWaterMark: ARCHIVE_HIGH_WATER_MARK });
    const gone = new Promise<never>((_, reject) => out.once('close', () => reject(new ClientGone())));
    gone.catch(() => undefined);
    zip.pipe(out);
    try {
      const files = new Map<string, string>();
      for (const task of archive.tasks) {
        if (out.destroyed) throw new ClientGone();
        const key = task.status === 'succeeded' ? archive.resultKeys.get(task.id) : null;
        if (!key) continue;
        const source = await this.openQuietly(key);
        if (!source) continue;
        const name = archiveImageName(task.index, task.prompt, extensionOf(key));
        await Promise.race([appendEntry(zip, source, name), gone]);
        files.set(task.id, name);
      }
      const manifest = {
        batch: json.batch(archive.batch),
        tasks: archive.tasks.map((t) => ({
          ...json.task(t),
          url: t.status === 'succeeded' ? t.resultUrl : null,
          file: files.get(t.id) ?? null,
        })),
      };
      zip.append(JSON.stringify(manifest, null, 2), { name: 'manifest.json' });
      await Promise.race([zip.finalize(), gone]);
    } catch (err) {
      zip.abort();
      out.destroy();
      if (err instanceof ClientGone) return;
      throw err;
    }
  }

  /** The object's stream, or null when it is gone (retention removed it after the read of the rows). */
  private async openQuietly(key: string): Promise<Readable | null> {
    try {
      return await this.storage.openRead(key);
    } catch (err) {
      if (err instanceof StorageObjectNotFoundError) {
        this.logger.debug(`Archive: ${key} is no longer stored; left out`);
        return null;
      }
      throw err;
    }
  }
}

/** The client went away mid-archive: not an error, just the end of the work. */
class ClientGone extends Error {
  constructor() {
    super('The client closed the connection');
  }
}

/**
 * Appends one stream and resolves once archiver has written it whole, so the next object is
 * opened only then (one open object at a time, however large the batch).
 */
function appendEntry(zip: Archiver, source: Readable, name: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onEntry = (): void => {
      cleanup();
      resolve();
    };
    const onError = (err: Error): void => {
      cleanup();
      source.destroy();
      reject(err);
    };
    const cleanup = (): void => {
      zip.off('entry', onEntry);
      zip.off('error', onError);
      source.off('error', onError);
    };
    zip.on('entry', onEntry);
    zip.on('error', onError);
    source.on('error', onError);
    zip.append(source, { name });
  });
}

function extensionOf(key: string): string {
  const dot = key.lastIndexOf('.');
  return dot === -1 ? 'png' : key.slice(dot + 1);
}
