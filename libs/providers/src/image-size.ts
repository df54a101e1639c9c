import { parseAspectRatio } from '@app/geometry';
import type { RenderResolution } from './render.types';

export { parseAspectRatio };

const LONG_EDGE_BASE: Record<RenderResolution, number> = { '1K': 1024, '2K': 2048, '4K': 4096 };

export interface PixelSize {
  width: number;
  height: number;
}

/**
 * docs/api.md#pixel-sizes: N = 1024/2048/4096, width = round(N*sqrt(w/h)/16)*16,
 * height = round(N*sqrt(h/w)/16)*16. The area stays about N*N whatever the ratio, and
 * multiples of 16 suit every upstream model we know of.
 */
export function pixelSize(aspectRatio: string, resolution: RenderResolution): PixelSize {
  const ratio = parseAspectRatio(aspectRatio);
  if (!ratio) throw new RangeError(`Not an aspect ratio: "${aspectRatio}"`);
  const n = LONG_EDGE_BASE[resolution];
  if (n === undefined) throw new RangeError(`Not a resolution: "${resolution}"`);
  return {
    width: Math.round((n * Math.sqrt(ratio.w / ratio.h)) / 16) * 16,
    height: Math.round((n * Math.sqrt(ratio.h / ratio.w)) / 16) * 16,
  };
}
