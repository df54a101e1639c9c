import { ASPECT_RATIO_PATTERN, isAspectRatio, parseAspectRatio, RESOLUTIONS } from './image-geometry';

describe('image geometry', () => {
  it('a ratio as written by clients: whole numbers from 1 to 999', () => {
    for (const ok of ['1:1', '16:9', '21:9', '999:1']) expect(isAspectRatio(ok)).toBe(true);
    for (const bad of ['0:1', '1:0', '1000:1', '16x9', '1.91:1', ' 1:1', '01:1', '', 16]) expect(isAspectRatio(bad)).toBe(false);
    expect(ASPECT_RATIO_PATTERN.source).toBe('^[1-9]\\d{0,2}:[1-9]\\d{0,2}$');
  });

  it('every ratio the pattern accepts parses to its numbers', () => {
    for (const ratio of ['1:1', '16:9', '999:7']) {
      const [w, h] = ratio.split(':').map(Number);
      expect(parseAspectRatio(ratio)).toEqual({ w, h });
    }
    expect(parseAspectRatio('0:1')).toBeNull();
  });

  it('the tiers, smallest first', () => {
    expect(RESOLUTIONS).toEqual(['1K', '2K', '4K']);
  });
});
