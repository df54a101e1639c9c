import sharp from 'sharp';
import { PrioritySemaphore } from '../limits/priority-semaphore';
import { BatchPreviews, PREVIEW_EDGE } from './batch-previews';

/** An in-memory storage that can be told to refuse writes. */
function memoryStorage() {
  const objects = new Map<string, Buffer>();
  let refuse = false;
  return {
    objects,
    refuseWrites: (on: boolean) => (refuse = on),
    put: (key: string, data: Buffer) => {
      if (refuse) return Promise.reject(new Error('storage refused the write'));
      objects.set(key, data);
      return Promise.resolve();
    },
    remove: (key: string) => Promise.resolve(void objects.delete(key)),
    publicUrl: (key: string) => `http://kiln.test/files/${key}`,
  };
}

const image = () =>
  sharp({ create: { width: 640, height: 320, channels: 3, background: { r: 200, g: 10, b: 10 } } })
    .png()
    .toBuffer();

describe('BatchPreviews', () => {
  let storage: ReturnType<typeof memoryStorage>;
  let previews: BatchPreviews;

  beforeEach(() => {
    storage = memoryStorage();
    previews = new BatchPreviews(storage, new PrioritySemaphore(2));
  });

  it('stores a small WebP of the first image of a batch, and none for its other images meanwhile', async () => {
    const batch = { id: 'b1', previewUrl: null };
    const made = await previews.make(batch, await image(), 0);
    expect(made).not.toBeNull();
    expect(made!.url).toBe(`http://kiln.test/files/${made!.key}`);
    const meta = await sharp(storage.objects.get(made!.key)).metadata();
    expect(meta.format).toBe('webp');
    expect(Math.max(meta.width, meta.height)).toBe(PREVIEW_EDGE);

    expect(await previews.make(batch, await image(), 1)).toBeNull();
    expect(await previews.make({ id: 'b2', previewUrl: null }, await image(), 0)).not.toBeNull();
  });

  it('makes none for a batch that already has one', async () => {
    expect(await previews.make({ id: 'b1', previewUrl: 'http://kiln.test/files/previews/x/preview.webp' }, await image(), 0)).toBeNull();
    expect(storage.objects.size).toBe(0);
  });

  it('a discarded preview is removed and lets the batch next image make one', async () => {
    const batch = { id: 'b1', previewUrl: null };
    const made = await previews.make(batch, await image(), 0);
    await previews.discard(batch.id, made);
    expect(storage.objects.size).toBe(0);
    expect(await previews.make(batch, await image(), 0)).not.toBeNull();
  });

  it('after a recorded success, keeps the preview the batch took and removes one that lost', async () => {
    const won = await previews.make({ id: 'b1', previewUrl: null }, await image(), 0);
    await previews.recorded(won, won!.url);
    expect(storage.objects.has(won!.key)).toBe(true);

    const lost = await previews.make({ id: 'b2', previewUrl: null }, await image(), 0);
    await previews.recorded(lost, 'http://kiln.test/files/previews/other/preview.webp');
    expect(storage.objects.has(lost!.key)).toBe(false);
  });

  it('a thumbnail that fails is no preview, and the batch next image tries again', async () => {
    const batch = { id: 'b1', previewUrl: null };
    storage.refuseWrites(true);
    expect(await previews.make(batch, await image(), 0)).toBeNull();
    expect(await previews.make(batch, Buffer.from('not an image'), 0)).toBeNull();
    storage.refuseWrites(false);
    expect(await previews.make(batch, await image(), 0)).not.toBeNull();
  });
});
