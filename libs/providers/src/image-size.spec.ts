import { parseAspectRatio, pixelSize } from './image-size';

describe('pixelSize', () => {
  it.each([
    ['1:1', '1K', 1024, 1024],
    ['16:9', '1K', 1360, 768],
    ['9:16', '1K', 768, 1360],
    ['3:2', '1K', 1248, 832],
    ['4:3', '2K', 2368, 1776],
    ['21:9', '1K', 1568, 672],
    ['1:1', '2K', 2048, 2048],
    ['1:1', '4K', 4096, 4096],
    ['16:9', '4K', 5456, 3072],
  ] as const)('%s at %s is %ix%i', (ratio, resolution, width, height) => {
    expect(pixelSize(ratio, resolution)).toEqual({ width, height });
  });

  it('always gives multiples of 16', () => {
    for (const ratio of ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9']) {
      for (const resolution of ['1K', '2K', '4K'] as const) {
        const { width, height } = pixelSize(ratio, resolution);
        expect(width % 16).toBe(0);
        expect(height % 16).toBe(0);
      }
    }
  });

  it('refuses what is not a ratio', () => {
    expect(() => pixelSize('16x9', '1K')).toThrow(RangeError);
    expect(() => pixelSize('0:1', '1K')).toThrow(RangeError);
    expect(parseAspectRatio('1.91:1')).toEqual({ w: 1.91, h: 1 });
  });
});
