import type { PixelSize } from '../image-size';
import { nearestSize, parseSize } from '../size-rules';

/** gpt-image-1, -1-mini, -1.5 (and chatgpt-image-latest) make these three sizes and refuse any other. */
const GPT_IMAGE_1_SIZES: PixelSize[] = [
  { width: 1024, height: 1024 },
  { width: 1536, height: 1024 },
  { width: 1024, height: 1536 },
];
const GPT_IMAGE_1_FAMILY = /^(gpt-image-1(\.5|-mini)?|chatgpt-image-latest)$/i;

/**
 * gpt-image-2 takes any WxH with both sides multiples of 16, ratio within 1:3..3:1, up to
 * 3840x2160 worth of pixels and 3840 on the long edge (the SDK's types; unconfirmed beyond
 * them): a larger ask is scaled down to fit, keeping its ratio.
 */
const GPT_IMAGE_2 = /^gpt-image-2/i;
const GPT_IMAGE_2_MAX_EDGE = 3840;
const GPT_IMAGE_2_MAX_PIXELS = 3840 * 2160;

/**
 * The size string the openai type sends for Kiln's exact size on a route: the route's
 * sizeMap entry when it has one (the operator knows best), else what a known model makes
 * (nearest ratio, then area), else the exact size.
 */
export function openAiUpstreamSize(route: { model: string; sizeMap?: Record<string, string> }, asked: PixelSize): string {
  const mapped = route.sizeMap?.[`${asked.width}x${asked.height}`];
  if (mapped !== undefined) return mapped;
  const made = madeByModel(route.model, asked) ?? asked;
  return `${made.width}x${made.height}`;
}

/** What the upstream makes for an ask: the sent size when it is WxH; null when unknown ("auto"). */
export function openAiMadeSize(route: { model: string; sizeMap?: Record<string, string> }, asked: PixelSize): PixelSize | null {
  return parseSize(openAiUpstreamSize(route, asked));
}

function madeByModel(model: string, asked: PixelSize): PixelSize | null {
  if (GPT_IMAGE_1_FAMILY.test(model)) return nearestSize(asked, GPT_IMAGE_1_SIZES);
  if (GPT_IMAGE_2.test(model)) {
    const scale = Math.min(
      1,
      GPT_IMAGE_2_MAX_EDGE / Math.max(asked.width, asked.height),
      Math.sqrt(GPT_IMAGE_2_MAX_PIXELS / (asked.width * asked.height)),
    );
    if (scale === 1) return null;
    return { width: Math.floor((asked.width * scale) / 16) * 16, height: Math.floor((asked.height * scale) / 16) * 16 };
  }
  return null;
}
