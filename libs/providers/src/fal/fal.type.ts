import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueMadeSize, queueSettings } from '../queue-route';
import { fakeFal } from './fal.fake';
import { FAL_DEFAULTS, falLabel, FalProvider, FalRoute } from './fal.provider';

const RATIOS_1K: Record<string, '1K'[]> = { '1:1': ['1K'], '4:3': ['1K'], '3:4': ['1K'], '3:2': ['1K'], '2:3': ['1K'], '16:9': ['1K'], '9:16': ['1K'] };
const FLUX_MODEL = { resolutionsByRatio: RATIOS_1K, maxRefImages: 0, supportsRefImages: false, supportsQuality: false, supportsBackground: false };

/** fal's queue (queue.fal.run): submit, poll the status, read the result; spec extensions v1.2 section 1. */
export const falType: QueueProviderType<FalRoute> = {
  type: 'fal',
  mode: 'queue',
  summary: "fal's queue: POST {baseUrl}/{model} (Authorization: Key), poll .../requests/{id}/status until COMPLETED, images[0].url from .../requests/{id}",
  settings: queueSettings({
    defaultBaseUrl: FAL_DEFAULTS.baseUrl,
    keyVariable: FAL_DEFAULTS.apiKeyEnv,
    modelExample: 'fal-ai/flux/schnell',
    sizeInputs: ['image_size', 'aspect_ratio'],
    defaultSizeInput: FAL_DEFAULTS.sizeInput,
    defaultReferenceInput: FAL_DEFAULTS.referenceInput,
  }),
  keyVariable: FAL_DEFAULTS.apiKeyEnv,
  work: 'upstream',
  metricsLabel: 'fal',
  describe: (route) => `${falLabel(route)} ${route.baseUrl ?? FAL_DEFAULTS.baseUrl}`,
  upstreamUrl: (route) => route.baseUrl ?? FAL_DEFAULTS.baseUrl,
  sizeFor: (route, asked) =>
    queueMadeSize(route.sizeInput ?? FAL_DEFAULTS.sizeInput, asked, {
      pixelRange: route.pixelRange ?? FAL_DEFAULTS.pixelRange,
      aspectRatios: route.aspectRatios ?? FAL_DEFAULTS.aspectRatios,
      ratioArea: asked.width * asked.height,
    }),
  presets: [
    {
      id: 'fal/fal-ai/flux/schnell',
      type: 'fal',
      settings: { model: 'fal-ai/flux/schnell', sizeInput: 'image_size' },
      cost: { usdPerImage: { '1K': 0.003 }, note: 'USD 0.003 per megapixel, as listed by fal' },
      notes: 'FLUX.1 [schnell], 1-4 steps; image_size {width, height}',
      model: FLUX_MODEL,
    },
    {
      id: 'fal/fal-ai/flux/dev',
      type: 'fal',
      settings: { model: 'fal-ai/flux/dev', sizeInput: 'image_size' },
      cost: { usdPerImage: { '1K': 0.025 }, note: 'USD 0.025 per megapixel, as listed by fal' },
      notes: 'FLUX.1 [dev]; image_size {width, height}',
      model: FLUX_MODEL,
    },
    {
      id: 'fal/fal-ai/flux-pro/v1.1-ultra',
      type: 'fal',
      settings: { model: 'fal-ai/flux-pro/v1.1-ultra', sizeInput: 'aspect_ratio' },
      cost: { usdPerImage: { '1K': 0.06, '2K': 0.06 }, note: 'per image, up to 4 megapixels, as listed by fal' },
      notes: 'FLUX1.1 [pro] ultra: aspect_ratio, up to 4 MP',
      model: { ...FLUX_MODEL, resolutionsByRatio: { '1:1': ['1K', '2K'], '16:9': ['1K', '2K'], '9:16': ['1K', '2K'], '4:3': ['1K', '2K'], '3:4': ['1K', '2K'] } },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new FalProvider(route, { apiKey: context.apiKey, timeoutMs: route.timeoutMs ?? context.timeoutMs, ...context.upstream }),
  testing: { fake: () => fakeFal() },
};
