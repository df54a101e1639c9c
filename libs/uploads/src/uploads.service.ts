import { Inject, Injectable, Logger } from '@nestjs/common';
import { promises as fs } from 'node:fs';
import { InjectRepository } from '@nestjs/typeorm';
import sharp, { Metadata } from 'sharp';
import { In, LessThan, Repository } from 'typeorm';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { UploadEntity } from '@app/database';
import { newObjectKey, StorageDriver, retentionCutoff, sweepObjects } from '@app/storage';
import { detectImageType, ImageType } from './image-type';
import { UPLOAD_LIMITS } from './upload.limits';
import { uploadDisplayName, uploadObjectName } from './upload.names';
import { uploadRefusals } from './uploads.errors';

/**
 * One file as received by a transport (multipart in the api), before any validation: a temp
 * file the transport owns and removes afterwards.
 */
export interface IncomingUpload {
  /** Client-supplied name; untrusted. */
  name: string;
  path: string;
  bytes: number;
}

interface InspectedUpload {
  name: string;
  path: string;
  bytes: number;
  type: ImageType;
  width: number;
  height: number;
}

/** Enough of a file's head for every signature detectImageType knows. */
const SIGNATURE_BYTES = 16;

const PURGE_CHUNK = 200;

@Injectable()
export class UploadsService {
  private readonly logger = new Logger(UploadsService.name);

  constructor(
    @InjectRepository(UploadEntity) private readonly uploads: Repository<UploadEntity>,
    private readonly storage: StorageDriver,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /**
   * Validates every file, then stores them all, or refuses the whole request with an
   * UploadRefusedError (invalid_request) and stores nothing. Rows come back in input order.
   * One file at a time, each read from its temp file when it is stored: a request of 20 files
   * of 10 MB holds one of them in memory, not all 200 MB.
   */
  async store(accountId: string, files: IncomingUpload[]): Promise<UploadEntity[]> {
    if (files.length === 0) throw uploadRefusals.noFiles();
    if (files.length > UPLOAD_LIMITS.maxFiles) {
      throw uploadRefusals.tooManyFiles(uploadDisplayName(files[UPLOAD_LIMITS.maxFiles].name));
    }
    // All inspections run before any write; the first refusal in file order answers.
    const valid: InspectedUpload[] = [];
    for (const file of files) valid.push(await this.inspect(file));

    const entities = valid.map((file) => {
      const storageKey = newObjectKey('uploads', uploadObjectName(file.name, file.type.extension));
      return this.uploads.create({
        accountId,
        storageKey,
        url: this.storage.publicUrl(storageKey),
        name: file.name,
        contentType: file.type.contentType,
        bytes: file.bytes,
        width: file.width,
        height: file.height,
      });
    });
    const keys = entities.map((e) => e.storageKey);
    try {
      for (const [i, file] of valid.entries()) {
        await this.storage.put(keys[i], await fs.readFile(file.path), file.type.contentType);
      }
      // One multi-row insert: the rows appear together or not at all.
      await this.uploads.insert(entities);
    } catch (error) {
      await this.removeObjects(keys);
      throw error;
    }
    return entities;
  }

  /** The caller's own uploads among `urls`, keyed by URL; foreign or unknown URLs are absent. */
  async findOwnedByUrls(accountId: string, urls: string[]): Promise<Map<string, UploadEntity>> {
    if (urls.length === 0) return new Map();
    const rows = await this.uploads.find({ where: { accountId, url: In([...new Set(urls)]) } });
    return new Map(rows.map((u) => [u.url, u]));
  }

  /**
   * The storage keys and types of these uploads, in the given order; null where an upload no
   * longer exists (removed by retention). What a render reads its reference images by.
   */
  async findStoredByIds(ids: readonly string[]): Promise<(Pick<UploadEntity, 'id' | 'storageKey' | 'contentType'> | null)[]> {
    if (ids.length === 0) return [];
    const rows = await this.uploads.find({
      select: { id: true, storageKey: true, contentType: true },
      where: { id: In([...new Set(ids)]) },
    });
    const byId = new Map(rows.map((u) => [u.id, u]));
    return ids.map((id) => byId.get(id) ?? null);
  }

  /**
   * Deletes uploads older than the retention period (config.storage.retentionDays), objects
   * first and rows second, so a crash midway leaves rows that the next run retries rather
   * than objects nothing points to. Returns how many uploads were purged.
   */
  async purgeExpired(now: Date = new Date()): Promise<number> {
    const cutoff = retentionCutoff(this.config.storage.retentionDays, now);
    const { swept, failed, failure } = await sweepObjects(
      this.storage,
      PURGE_CHUNK,
      async () =>
        (
          await this.uploads.find({
            select: { id: true, storageKey: true },
            where: { createdAt: LessThan(cutoff) },
            order: { createdAt: 'ASC' },
            take: PURGE_CHUNK,
          })
        ).map((u) => ({ id: u.id, key: u.storageKey })),
      (ids) => this.uploads.delete({ id: In(ids) }),
    );
    if (failed > 0) this.logger.warn({ err: failure }, `Could not remove ${failed} expired upload objects`);
    return swept;
  }

  /** Size, then magic bytes, then the header's dimensions; nothing here decodes pixels. */
  private async inspect(file: IncomingUpload): Promise<InspectedUpload> {
    const name = uploadDisplayName(file.name);
    if (file.bytes > UPLOAD_LIMITS.maxBytes) throw uploadRefusals.tooLarge(name);
    const type = detectImageType(await readHead(file.path, SIGNATURE_BYTES));
    if (!type) throw uploadRefusals.unsupportedType(name);

    let metadata: Metadata;
    try {
      // limitInputPixels off so a huge header is reported as too_many_pixels, not as unreadable;
      // metadata() reads the header only, so the canvas is never allocated.
      metadata = await sharp(file.path, { limitInputPixels: false }).metadata();
    } catch {
      throw uploadRefusals.unsupportedType(name);
    }
    const { width, height } = metadata;
    if (metadata.format !== type.sharpFormat || !width || !height) throw uploadRefusals.unsupportedType(name);
    if (width > UPLOAD_LIMITS.maxDimension || height > UPLOAD_LIMITS.maxDimension || width * height > UPLOAD_LIMITS.maxPixels) {
      throw uploadRefusals.tooManyPixels(name, width, height);
    }
    // Width and height as displayed, after EXIF rotation.
    const oriented = metadata.autoOrient ?? { width, height };
    return { name, path: file.path, bytes: file.bytes, type, width: oriented.width, height: oriented.height };
  }

  private async removeObjects(keys: string[]): Promise<void> {
    const results = await Promise.allSettled(keys.map((key) => this.storage.remove(key)));
    const failures = results.filter((r) => r.status === 'rejected').length;
    if (failures > 0) this.logger.error(`Could not remove ${failures} objects of a failed upload`);
  }
}

/** The first `bytes` bytes of a file (fewer if it is shorter). */
async function readHead(path: string, bytes: number): Promise<Buffer> {
  const handle = await fs.open(path, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(bytes), 0, bytes, 0);
    return buffer.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}
