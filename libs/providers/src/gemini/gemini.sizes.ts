import type { PixelSize } from '../image-size';
import type { RenderResolution } from '../render.types';
import { nearestSize } from '../size-rules';

/**
 * The ratios Gemini image models take, with what each makes at 1K (2K and 4K are twice and
 * four times as wide and high). 3.x models take imageSize 1K/2K/4K; older ones make 1K only.
 */
const RATIOS_1K: (PixelSize & { ratio: string })[] = [
  { ratio: '1:1', width: 1024, height: 1024 },
  { ratio: '2:3', width: 832, height: 1248 },
  { ratio: '3:2', width: 1248, height: 832 },
  { ratio: '3:4', width: 864, height: 1184 },
  { ratio: '4:3', width: 1184, height: 864 },
  { ratio: '4:5', width: 896, height: 1152 },
  { ratio: '5:4', width: 1152, height: 896 },
  { ratio: '9:16', width: 768, height: 1344 },
  { ratio: '16:9', width: 1344, height: 768 },
  { ratio: '21:9', width: 1536, height: 672 },
];

const SCALE: Record<RenderResolution, number> = { '1K': 1, '2K': 2, '4K': 4 };

/** Models that take `imageSize` (Gemini 3 and later); older ones make 1K whatever is asked. */
export function takesImageSize(model: string): boolean {
  return /^gemini-([3-9]|\d{2,})/i.test(model);
}

/** What Kiln sends for an exact size: the nearest ratio Gemini takes, and imageSize when the model takes it. */
export function geminiImageConfig(
  model: string,
  asked: PixelSize,
  resolution: RenderResolution,
): { aspectRatio: string; imageSize?: RenderResolution } {
  const { ratio } = nearestSize(asked, RATIOS_1K);
  return takesImageSize(model) ? { aspectRatio: ratio, imageSize: resolution } : { aspectRatio: ratio };
}

/** The pixel size Gemini makes for that request. */
export function geminiMadeSize(model: string, asked: PixelSize, resolution: RenderResolution): PixelSize {
  const config = geminiImageConfig(model, asked, resolution);
  const base = RATIOS_1K.find((r) => r.ratio === config.aspectRatio)!;
  const scale = SCALE[config.imageSize ?? '1K'];
  return { width: base.width * scale, height: base.height * scale };
}
