import { parseAspectRatio } from '@app/geometry';

/** The pairs the queue types' presets offer today: seven common ratios, at 1K only. */
export const QUEUE_PRESET_PAIRS_1K: Record<string, '1K'[]> = {
  '1:1': ['1K'],
  '4:3': ['1K'],
  '3:4': ['1K'],
  '3:2': ['1K'],
  '2:3': ['1K'],
  '16:9': ['1K'],
  '9:16': ['1K'],
};

/** What an upstream that takes pixel sizes accepts: each side within [min, max], a multiple of `multiple`. */
export interface PixelRange {
  min: number;
  max: number;
  multiple: number;
}

/**
 * The legal size nearest Kiln's exact one: the same ratio, scaled only as far as the range
 * requires (down when a side is too long, up when one is too short), each side rounded to the
 * multiple. The task's width and height then say what came back.
 */
export function fitPixels(width: number, height: number, range: PixelRange): { width: number; height: number } {
  let scale = 1;
  const longest = Math.max(width, height);
  const shortest = Math.min(width, height);
  if (longest > range.max) scale = range.max / longest;
  else if (shortest < range.min) scale = Math.min(range.min / shortest, range.max / longest);
  const side = (v: number) => {
    const rounded = Math.round((v * scale) / range.multiple) * range.multiple;
    const floor = Math.ceil(range.min / range.multiple) * range.multiple;
    const ceiling = Math.floor(range.max / range.multiple) * range.multiple;
    return Math.min(ceiling, Math.max(floor, rounded));
  };
  return { width: side(width), height: side(height) };
}

/** The ratio of `ratios` ("w:h") nearest width/height (by the logarithm of the ratio, so 2:1 and 1:2 are as far from 1:1). */
export function nearestRatio(width: number, height: number, ratios: readonly string[]): string {
  const target = Math.log(width / height);
  let best = ratios[0];
  let bestDistance = Infinity;
  for (const ratio of ratios) {
    const parsed = parseAspectRatio(ratio);
    if (!parsed) continue;
    const distance = Math.abs(Math.log(parsed.w / parsed.h) - target);
    if (distance < bestDistance) {
      best = ratio;
      bestDistance = distance;
    }
  }
  return best;
}
