/**
 * The shape of an image as Kiln names it: a resolution tier and an aspect ratio. The one home
 * of both grammars, below every lib that speaks them (providers size renders with them, the
 * catalog prices and lists them, batches validate them), so none of those need another.
 */

/** A resolution tier: the long edge of a 1:1 image, 1024, 2048 or 4096 pixels. */
export type Resolution = '1K' | '2K' | '4K';

/** Every tier, smallest first. */
export const RESOLUTIONS: readonly Resolution[] = ['1K', '2K', '4K'];

/**
 * An aspect ratio as clients and the catalog write it: `w:h`, each a whole number from 1 to
 * 999 ("16:9"). The API's request schema and the catalog's admin validation both use this.
 */
export const ASPECT_RATIO_PATTERN = /^[1-9]\d{0,2}:[1-9]\d{0,2}$/;

export function isAspectRatio(value: unknown): value is string {
  return typeof value === 'string' && ASPECT_RATIO_PATTERN.test(value);
}

/**
 * The numbers of a ratio, for size arithmetic (pixelSize). Wider than ASPECT_RATIO_PATTERN:
 * it reads any `w:h` of positive numbers, decimals too ("1.91:1"), with spaces around; null
 * when it is not a ratio. What a request may carry is decided by the pattern, before this.
 */
export function parseAspectRatio(aspectRatio: string): { w: number; h: number } | null {
  const match = /^\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*$/.exec(aspectRatio);
  if (!match) return null;
  const w = Number(match[1]);
  const h = Number(match[2]);
  if (!(w > 0 && h > 0)) return null;
  return { w, h };
}
