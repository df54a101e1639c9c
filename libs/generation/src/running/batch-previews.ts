import { Logger } from '@nestjs/common';
import sharp from 'sharp';
import { newObjectKey, StorageDriver } from '@app/storage';
import { PrioritySemaphore } from '../limits/priority-semaphore';
import { describeError } from './task-failure';

/** Longer side of a batch's preview thumbnail. */
export const PREVIEW_EDGE = 256;
/** Batch ids remembered; forgetting them only costs a spare thumbnail. */
const MAX_PREVIEW_MEMORY = 10_000;

/** A small WebP of a result (transparency kept), for lists and dashboards. */
export async function makePreview(image: Buffer): Promise<Buffer> {
  return sharp(image)
    .resize(PREVIEW_EDGE, PREVIEW_EDGE, { fit: 'inside', withoutEnlargement: true })
    .webp({ quality: 80, effort: 2 })
    .toBuffer();
}

/** An image in another format (a JPEG has no alpha: transparency becomes white). */
export async function convertImage(image: Buffer, format: 'png' | 'jpeg' | 'webp'): Promise<Buffer> {
  const pipeline = sharp(image);
  if (format === 'jpeg') return pipeline.flatten({ background: '#ffffff' }).jpeg({ quality: 90 }).toBuffer();
  return format === 'webp' ? pipeline.webp({ quality: 90 }).toBuffer() : pipeline.png().toBuffer();
}

export interface StoredPreview {
  key: string;
  url: string;
}

/**
 * The first image of a batch to succeed becomes its preview. A preview is made before the
 * success is recorded, so a batch is never done without one; one attempt per batch at a time
 * in this process, and a run that loses the race to another replica (the batch got a preview
 * meanwhile) deletes its own. A thumbnail that fails never fails the task, and lets the
 * batch's next image try.
 */
export class BatchPreviews {
  private readonly logger = new Logger(BatchPreviews.name);
  /**
   * Batches this process is making (or has made) a preview for. Without it, every task of a
   * batch's first wave renders, stores and throws away a preview of its own, because none of
   * them has succeeded when the others look. Bounded: cleared when it grows past MAX_PREVIEW_MEMORY.
   */
  private readonly previewing = new Set<string>();

  constructor(
    private readonly storage: Pick<StorageDriver, 'put' | 'remove' | 'publicUrl'>,
    /** CPU-bound local work shares the renders' slots. */
    private readonly slots: PrioritySemaphore,
  ) {}

  /** A stored preview of `image` for the batch, or null when the batch has one (or one is being made). */
  async make(batch: { id: string; previewUrl: string | null }, image: Buffer, priority: number): Promise<StoredPreview | null> {
    if (batch.previewUrl || this.previewing.has(batch.id)) return null;
    if (this.previewing.size >= MAX_PREVIEW_MEMORY) this.previewing.clear();
    this.previewing.add(batch.id);
    try {
      const webp = await this.slots.use(priority, undefined, () => makePreview(image));
      const key = newObjectKey('previews', 'preview.webp');
      await this.storage.put(key, webp, 'image/webp');
      return { key, url: this.storage.publicUrl(key) };
    } catch (err) {
      this.previewing.delete(batch.id);
      this.logger.warn(`No preview for batch ${batch.id} from this image: ${describeError(err)}`);
      return null;
    }
  }

  /** The run's success is recorded and the batch kept `keptUrl`: a preview of this run that lost is removed. */
  async recorded(preview: StoredPreview | null, keptUrl: string | null): Promise<void> {
    if (preview && keptUrl !== preview.url) await this.removeQuietly(preview);
  }

  /** The run's success was not recorded: its preview is removed, and the batch's next image may make one. */
  async discard(batchId: string, preview: StoredPreview | null): Promise<void> {
    if (!preview) return;
    this.previewing.delete(batchId);
    await this.removeQuietly(preview);
  }

  private async removeQuietly(preview: StoredPreview): Promise<void> {
    await this.storage.remove(preview.key).catch(() => undefined);
  }
}
