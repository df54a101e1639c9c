import sharp from 'sharp';
import { BuiltinProvider } from './builtin.provider';
import { pixelSize } from '../image-size';
import { ProviderError, RenderRequest, RenderResolution } from '../render.types';

const provider = new BuiltinProvider();

function request(overrides: Partial<RenderRequest> = {}): RenderRequest {
  return {
    prompt: 'a lighthouse at dusk, oil painting',
    seed: 7,
    width: 1024,
    height: 1024,
    resolution: '1K',
    aspectRatio: '1:1',
    quality: 'auto',
    background: null,
    references: [],
    ...overrides,
  };
}

async function rawPixels(png: Buffer): Promise<{ data: Buffer; width: number; height: number; channels: number }> {
  const { data, info } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: info.channels };
}

function pixelAt(img: { data: Buffer; width: number; channels: number }, x: number, y: number): number[] {
  const offset = (y * img.width + x) * img.channels;
  return [...img.data.subarray(offset, offset + img.channels)];
}

function countColour(img: { data: Buffer; channels: number }, rgb: [number, number, number]): number {
  let count = 0;
  for (let i = 0; i < img.data.length; i += img.channels) {
    if (img.data[i] === rgb[0] && img.data[i + 1] === rgb[1] && img.data[i + 2] === rgb[2]) count++;
  }
  return count;
}

describe('BuiltinProvider', () => {
  it.each([
    ['1:1', '1K'],
    ['16:9', '1K'],
    ['9:16', '1K'],
    ['21:9', '1K'],
    ['3:4', '2K'],
    ['1:1', '4K'],
  ] as Array<[string, RenderResolution]>)(
    'renders %s at %s at the exact pixel size',
    async (aspectRatio, resolution) => {
      const { width, height } = pixelSize(aspectRatio, resolution);
      const result = await provider.render(request({ aspectRatio, resolution, width, height }));
      expect(result).toMatchObject({ contentType: 'image/png', width, height });
      const meta = await sharp(result.data).metadata();
      expect([meta.format, meta.width, meta.height]).toEqual(['png', width, height]);
    },
    20_000,
  );

  it('is deterministic for (prompt, seed) and changes with the seed', async () => {
    const a = await provider.render(request());
    const b = await provider.render(request());
    const c = await provider.render(request({ seed: 8 }));
    const d = await provider.render(request({ prompt: 'a lighthouse at dawn, oil painting' }));
    expect(a.data.equals(b.data)).toBe(true);
    expect(a.data.equals(c.data)).toBe(false);
    expect(a.data.equals(d.data)).toBe(false);
  });

  it('leaves a transparent background really transparent', async () => {
    const result = await provider.render(request({ background: 'transparent', width: 1360, height: 768, aspectRatio: '16:9' }));
    const img = await rawPixels(result.data);
    expect(img.channels).toBe(4);
    for (const [x, y] of [
      [0, 0],
      [img.width - 1, 0],
      [0, img.height - 1],
      [img.width - 1, img.height - 1],
    ]) {
      expect(pixelAt(img, x, y)[3]).toBe(0);
    }
    // ...while the middle (the prompt panel) is not
    expect(pixelAt(img, img.width >> 1, img.height >> 1)[3]).toBeGreaterThan(0);
  });

  it('paints a #RRGGBB background, opaque', async () => {
    const result = await provider.render(request({ background: '#FF0000' }));
    const img = await rawPixels(result.data);
    expect(img.channels).toBe(3);
    expect(pixelAt(img, 0, 0)).toEqual([255, 0, 0]);
    expect(pixelAt(img, img.width - 1, img.height - 1)).toEqual([255, 0, 0]);
  });

  it('composites the reference images visibly', async () => {
    const green = await sharp({ create: { width: 300, height: 200, channels: 3, background: '#00FF00' } })
      .png()
      .toBuffer();
    const without = await provider.render(request({ background: '#FF0000' }));
    const withRefs = await provider.render(
      request({
        background: '#FF0000',
        references: [
          { data: green, contentType: 'image/png' },
          { data: green, contentType: 'image/png' },
        ],
      }),
    );
    expect(withRefs.data.equals(without.data)).toBe(false);
    expect(countColour(await rawPixels(without.data), [0, 255, 0])).toBe(0);
    // two thumbnails of at least 100x100 pure green each
    expect(countColour(await rawPixels(withRefs.data), [0, 255, 0])).toBeGreaterThan(2 * 100 * 100);
  });

  it('fits many references and a very long prompt', async () => {
    const blue = await sharp({ create: { width: 64, height: 64, channels: 3, background: '#0000FF' } })
      .jpeg()
      .toBuffer();
    const result = await provider.render(
      request({
        width: 1568,
        height: 672,
        aspectRatio: '21:9',
        prompt: `${'x'.repeat(600)} ${'word '.repeat(900)}`,
        references: Array.from({ length: 20 }, () => ({ data: blue, contentType: 'image/jpeg' })),
      }),
    );
    expect([result.width, result.height]).toEqual([1568, 672]);
  });

  it('prints prompts holding markup characters and control characters', async () => {
    const result = await provider.render(request({ prompt: '<span foreground="red">& </b> \u0000 "quoted" \'x\'' }));
    expect(result.width).toBe(1024);
    const empty = await provider.render(request({ prompt: '   ' }));
    expect(empty.width).toBe(1024);
  });

  it('spends more effort on the file for high quality, with the same pixels', async () => {
    const low = await provider.render(request({ quality: 'low' }));
    const high = await provider.render(request({ quality: 'high' }));
    expect(high.data.length).toBeLessThan(low.data.length);
    expect((await rawPixels(high.data)).data.equals((await rawPixels(low.data)).data)).toBe(true);
  });

  it('reports progress', async () => {
    const progress: number[] = [];
    await provider.render(request({ onProgress: (p) => progress.push(p) }));
    expect(progress).toEqual([30, 70]);
  });

  it('refuses a malformed background and an unreadable reference as bad requests', async () => {
    await expect(provider.render(request({ background: 'red' }))).rejects.toMatchObject({ kind: 'bad_request', retryable: false });
    const err = await provider
      .render(request({ references: [{ data: Buffer.from('not an image'), contentType: 'image/png' }] }))
      .catch((e) => e);
    expect(err).toBeInstanceOf(ProviderError);
    expect(err).toMatchObject({ kind: 'bad_request', retryable: false, message: 'Reference image 1 could not be read as an image' });
  });

  it('rejects with the caller reason when already aborted', async () => {
    const controller = new AbortController();
    const reason = new Error('cancelled');
    controller.abort(reason);
    await expect(provider.render(request({ signal: controller.signal }))).rejects.toBe(reason);
  });
});
