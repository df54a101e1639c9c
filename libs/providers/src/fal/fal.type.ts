import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueSettings, queueTypeParts } from '../queue-route';
import { upstreamDeps } from '../route-settings';
import { fakeFal } from './fal.fake';
import { FAL_DEFAULTS, falLabel, FalProvider, FalRoute } from './fal.provider';

const RATIOS_1K: Record<string, '1K'[]> = { '1:1': ['1K'], '4:3': ['1K'], '3:4': ['1K'], '3:2': ['1K'], '2:3': ['1K'], '16:9': ['1K'], '9:16': ['1K'] };
const FLUX_MODEL = { resolutionsByRatio: RATIOS_1K, maxRefImages: 0, supportsRefImages: false, supportsQuality: false, supportsBackground: false };

/** fal's queue (queue.fal.run): submit, poll the status, read the result; spec extensions v1.2 section 1. */
export const falType: QueueProviderType<FalRoute> = {
  type: 'fal',
  mode: 'queue',
  summary: "fal's queue: POST {baseUrl}/{model} (Authorization: Key), poll .../requests/{id}/status until COMPLETED, images[0].url from .../requests/{id}",
  settings: queueSettings(FAL_DEFAULTS, { modelExample: 'fal-ai/flux/schnell', sizeInputs: ['image_size', 'aspect_ratio'] }),
  metricsLabel: 'fal',
  ...queueTypeParts(FAL_DEFAULTS, falLabel, (asked) => asked.width * asked.height),
  // 422s (validation, content policy) and a completed run its safety checker flagged (no status).
  billsFailure: (err) => err.status === 422 || (err.kind === 'content_refused' && err.status === undefined),
  presets: [
    {
      id: 'fal/fal-ai/flux/schnell',
      type: 'fal',
      settings: { model: 'fal-ai/flux/schnell', sizeInput: 'image_size' },
      cost: { usdPerImage: { '1K': 0.003 }, readOn: '2026-11-20', note: 'USD 0.003 per megapixel, as listed by fal' },
      notes: 'FLUX.1 [schnell], 1-4 steps; image_size {width, height}',
      model: FLUX_MODEL,
    },
    {
      id: 'fal/fal-ai/flux/dev',
      type: 'fal',
      settings: { model: 'fal-ai/flux/dev', sizeInput: 'image_size' },
      cost: { usdPerImage: { '1K': 0.025 }, readOn: '2026-11-20', note: 'USD 0.025 per megapixel, as listed by fal' },
      notes: 'FLUX.1 [dev]; image_size {width, height}',
      model: FLUX_MODEL,
    },
    {
      id: 'fal/fal-ai/flux-pro/v1.1-ultra',
      type: 'fal',
      settings: { model: 'fal-ai/flux-pro/v1.1-ultra', sizeInput: 'aspect_ratio' },
      cost: { usdPerImage: { '1K': 0.06, '2K': 0.06 }, readOn: '2026-11-20', note: 'per image, up to 4 megapixels, as listed by fal' },
      notes: 'FLUX1.1 [pro] ultra: aspect_ratio, up to 4 MP',
      model: { ...FLUX_MODEL, resolutionsByRatio: { '1:1': ['1K', '2K'], '16:9': ['1K', '2K'], '9:16': ['1K', '2K'], '4:3': ['1K', '2K'], '3:4': ['1K', '2K'] } },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new FalProvider(route, upstreamDeps(route, context)),
  testing: { fake: () => fakeFal() },
};
