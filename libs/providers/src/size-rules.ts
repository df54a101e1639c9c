import type { PixelSize } from './image-size';

/**
 * How a type picks what to send when its upstream takes only some sizes (spec v1.2 section 1):
 * the nearest aspect ratio first, then, among sizes of that ratio, the nearest area.
 * Ratios and areas are compared on a log scale, so 2:1 is as far from 1:1 as 1:2 is.
 */
export function nearestSize<S extends PixelSize>(asked: PixelSize, legal: readonly S[]): S {
  if (legal.length === 0) throw new RangeError('No legal sizes to choose from');
  const ratioDistance = (s: PixelSize) => Math.abs(Math.log(s.width / s.height) - Math.log(asked.width / asked.height));
  const areaDistance = (s: PixelSize) => Math.abs(Math.log((s.width * s.height) / (asked.width * asked.height)));
  // Ratios closer than this are the same ratio (rounding of pixel sizes to multiples of 16).
  const SAME_RATIO = 0.005;
  return legal.reduce((best, s) => {
    const dr = ratioDistance(s) - ratioDistance(best);
    if (dr < -SAME_RATIO) return s;
    if (dr > SAME_RATIO) return best;
    return areaDistance(s) < areaDistance(best) ? s : best;
  });
}

/** The honest-sizes thresholds: the made ratio within 3 % of the asked one, and at least 0.8 x its area. */
export const HONEST_RATIO_TOLERANCE = 0.03;
export const HONEST_MIN_AREA = 0.8;

/**
 * Whether an upstream that makes `made` for Kiln's `asked` delivers what was charged: the same
 * ratio (within 3 %) and not much smaller (at least 0.8 x the area). A route offers a ratio x
 * resolution pair only if this holds (docs/providers.md "Honest sizes").
 */
export function isHonest(asked: PixelSize, made: PixelSize): boolean {
  const ratioError = Math.abs(made.width / made.height / (asked.width / asked.height) - 1);
  return ratioError <= HONEST_RATIO_TOLERANCE && made.width * made.height >= HONEST_MIN_AREA * asked.width * asked.height;
}

/** "1536x1024" -> { width, height }; null for anything else ("auto"). */
export function parseSize(value: string): PixelSize | null {
  const m = /^(\d+)x(\d+)$/.exec(value);
  return m && Number(m[1]) > 0 && Number(m[2]) > 0 ? { width: Number(m[1]), height: Number(m[2]) } : null;
}
