import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueSettings, queueTypeParts } from '../queue-route';
import { QUEUE_PRESET_PAIRS_1K } from '../queue-sizes';
import { upstreamDeps } from '../route-settings';
import { FAL_DEFAULTS, falLabel, FalProvider, FalRoute } from './fal.provider';
import { falPricing } from './fal.price';

const FAL_MEGAPIXEL_NOTE = 'a megapixel counted as 1024x1024 pixels (fal prices a 1024x1024 image as one)';

const FLUX_MODEL = {
  resolutionsByRatio: QUEUE_PRESET_PAIRS_1K,
  maxRefImages: 0,
  supportsRefImages: false,
  supportsQuality: false,
  supportsBackground: false,
};

/** fal's queue (queue.fal.run): submit, poll the status, read the result; spec extensions v1.2 section 1. */
export const falType: QueueProviderType<FalRoute> = {
  type: 'fal',
  mode: 'queue',
  summary:
    "fal's queue: POST {baseUrl}/{model} (Authorization: Key), poll .../requests/{id}/status until COMPLETED, images[0].url from .../requests/{id}",
  settings: queueSettings(FAL_DEFAULTS, {
    modelExample: 'fal-ai/flux/schnell',
    sizeInputs: ['image_size', 'aspect_ratio'],
    pricing: falPricing,
  }),
  pricing: falPricing,
  metricsLabel: 'fal',
  cancelsUpstream: true,
  ...queueTypeParts(FAL_DEFAULTS, falLabel, (asked) => asked.width * asked.height),
  // 422s (validation, content policy) and a completed run its safety checker flagged (no status).
  billsFailure: (err) => err.status === 422 || (err.kind === 'content_refused' && err.status === undefined),
  presets: [
    {
      id: 'fal/fal-ai/flux/schnell',
      type: 'fal',
      settings: { model: 'fal-ai/flux/schnell', sizeInput: 'image_size' },
      cost: {
        rule: { per: 'megapixel', usd: 0.003, rounding: 'up' },
        readOn: '2026-11-28',
        source: 'https://fal.ai/models/fal-ai/flux/schnell',
        unconfirmed: ['USD 0.003 per megapixel (seen in a copy of the page, not on it)', FAL_MEGAPIXEL_NOTE],
      },
      notes: 'FLUX.1 [schnell], 1-4 steps; image_size {width, height}',
      model: FLUX_MODEL,
    },
    {
      id: 'fal/fal-ai/flux/dev',
      type: 'fal',
      settings: { model: 'fal-ai/flux/dev', sizeInput: 'image_size' },
      cost: {
        rule: { per: 'megapixel', usd: 0.025, rounding: 'up' },
        readOn: '2026-11-28',
        source: 'https://fal.ai/models/fal-ai/flux/dev',
        unconfirmed: [FAL_MEGAPIXEL_NOTE],
        note: 'fal: "Your request will cost $0.025 per megapixel. Images are billed by rounding up to the nearest megapixel."',
      },
      notes: 'FLUX.1 [dev]; image_size {width, height}',
      model: FLUX_MODEL,
    },
    {
      id: 'fal/fal-ai/flux-pro/v1.1-ultra',
      type: 'fal',
      settings: { model: 'fal-ai/flux-pro/v1.1-ultra', sizeInput: 'aspect_ratio' },
      cost: {
        rule: { per: 'image', usd: 0.06 },
        readOn: '2026-11-28',
        source: 'https://fal.ai/docs/model-api-reference/image-generation-api/flux-pro-v1.1-ultra',
        note: 'per image, up to 4 megapixels',
      },
      notes: 'FLUX1.1 [pro] ultra: aspect_ratio, up to 4 MP',
      model: {
        ...FLUX_MODEL,
        resolutionsByRatio: { '1:1': ['1K', '2K'], '16:9': ['1K', '2K'], '9:16': ['1K', '2K'], '4:3': ['1K', '2K'], '3:4': ['1K', '2K'] },
      },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new FalProvider(route, upstreamDeps(route, context)),
};
