import type { PixelSize } from '../image-size';
import { queueMadeSize } from '../queue-route';
import { fitPixels, nearestRatio } from '../queue-sizes';
import { REPLICATE_DEFAULTS, ReplicateRoute } from './replicate.provider';

/**
 * What Replicate's FLUX models make for each `aspect_ratio` (at the default `megapixels`
 * "1"), as their published model code lists it: about a megapixel, each side a multiple of
 * 64. Not the exact ratio: 4:3 is 1152x896 (9:7), 4:5 is 896x1088, 3-5 % off Kiln's sizes
 * for those ratios, so the honest-sizes rule keeps those pairs off a route that sends them.
 */
export const FLUX_ASPECT_RATIO_SIZES: Readonly<Record<string, PixelSize>> = {
  '1:1': { width: 1024, height: 1024 },
  '16:9': { width: 1344, height: 768 },
  '21:9': { width: 1536, height: 640 },
  '3:2': { width: 1216, height: 832 },
  '2:3': { width: 832, height: 1216 },
  '4:5': { width: 896, height: 1088 },
  '5:4': { width: 1088, height: 896 },
  '3:4': { width: 896, height: 1152 },
  '4:3': { width: 1152, height: 896 },
  '9:16': { width: 768, height: 1344 },
  '9:21': { width: 640, height: 1536 },
};

/**
 * The size a Replicate route's model makes for Kiln's exact size, by the rule its request
 * mapping sends (replicate.provider.ts input()): `aspect_ratio` makes the FLUX size of the
 * nearest ratio (a ratio outside that table: about a megapixel at the ratio); `width_height`
 * and `aspect_ratio_custom` make the nearest legal pixel size, ratio kept.
 */
export function replicateMadeSize(route: ReplicateRoute, asked: PixelSize): PixelSize {
  if ((route.sizeInput ?? REPLICATE_DEFAULTS.sizeInput) !== 'aspect_ratio') {
    return fitPixels(asked.width, asked.height, route.pixelRange ?? REPLICATE_DEFAULTS.pixelRange);
  }
  const aspectRatios = route.aspectRatios ?? REPLICATE_DEFAULTS.aspectRatios;
  const ratio = nearestRatio(asked.width, asked.height, aspectRatios);
  return (
    FLUX_ASPECT_RATIO_SIZES[ratio] ??
    queueMadeSize('aspect_ratio', asked, { pixelRange: REPLICATE_DEFAULTS.pixelRange, aspectRatios, ratioArea: 1024 * 1024 })
  );
}
