import { RouteSettingsError } from './provider-type';
import { validateRoute } from './provider-types.registry';
import { fitPixels, nearestRatio } from './queue-sizes';

describe('queue upstream sizes', () => {
  it('fitPixels keeps the ratio, scales only as far as the range needs, and rounds to the multiple', () => {
    const bfl = { min: 256, max: 1440, multiple: 32 };
    expect(fitPixels(1024, 1024, bfl)).toEqual({ width: 1024, height: 1024 });
    expect(fitPixels(1360, 768, bfl)).toEqual({ width: 1376, height: 768 });
    // 2K 16:9 (2720x1536) is scaled down to the longest side BFL takes.
    expect(fitPixels(2720, 1536, bfl)).toEqual({ width: 1440, height: 800 });
    // A side below the minimum is scaled up, never past the maximum.
    expect(fitPixels(200, 100, { min: 256, max: 2048, multiple: 16 })).toEqual({ width: 512, height: 256 });
  });

  it('nearestRatio picks the nearest on a log scale (2:1 and 1:2 are as far from 1:1)', () => {
    const replicate = ['1:1', '16:9', '21:9', '3:2', '2:3', '4:5', '5:4', '3:4', '4:3', '9:16', '9:21'];
    expect(nearestRatio(1360, 768, replicate)).toBe('16:9');
    expect(nearestRatio(768, 1360, replicate)).toBe('9:16');
    expect(nearestRatio(1024, 1024, replicate)).toBe('1:1');
    expect(nearestRatio(1600, 1000, replicate)).toBe('3:2');
  });
});

describe('queue route aspectRatios', () => {
  const fal = (aspectRatios: unknown) => ({
    type: 'fal',
    baseUrl: 'https://queue.fal.run',
    model: 'fal-ai/flux/dev',
    sizeInput: 'aspect_ratio',
    aspectRatios,
  });

  it('takes the ratio grammar requests and the catalog use, and nothing looser', () => {
    expect(() => validateRoute(fal(['16:9', '1:1', '9:21']))).not.toThrow();
    for (const ratio of ['0:5', '5:0', '01:2', '1000:1', '16:9 ', '1.5:1']) {
      expect(() => validateRoute(fal([ratio]))).toThrow(new RouteSettingsError('provider.aspectRatios', 'invalid'));
    }
  });
});
