import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueSettings, queueTypeParts } from '../queue-route';
import { QUEUE_PRESET_PAIRS_1K } from '../queue-sizes';
import { upstreamDeps } from '../route-settings';
import { BFL_DEFAULTS, bflLabel, BflProvider, BflRoute } from './bfl.provider';
import { bflPricing } from './bfl.price';

/** Black Forest Labs' API; spec extensions v1.2 section 1. */
export const bflType: QueueProviderType<BflRoute> = {
  type: 'bfl',
  mode: 'queue',
  summary: 'Black Forest Labs: POST {baseUrl}/{model} (x-key) {prompt, width, height, seed}, poll polling_url until Ready; result.sample',
  settings: queueSettings(BFL_DEFAULTS, {
    modelExample: 'flux-pro-1.1',
    sizeInputs: ['width_height', 'aspect_ratio'],
    pricing: bflPricing,
  }),
  pricing: bflPricing,
  metricsLabel: 'bfl',
  ...queueTypeParts(BFL_DEFAULTS, bflLabel, () => 1024 * 1024),
  presets: [
    {
      id: 'bfl/flux-pro-1.1',
      type: 'bfl',
      settings: { model: 'flux-pro-1.1', sizeInput: 'width_height' },
      cost: {
        rule: { per: 'image', usd: 0.04 },
        readOn: '2026-11-28',
        source: 'https://docs.bfl.ml/quick_start/pricing',
        note: '4 credits of USD 0.01 per image',
      },
      notes: 'FLUX1.1 [pro]: width and height 256-1440, multiples of 32; one reference as image_prompt',
      model: {
        resolutionsByRatio: QUEUE_PRESET_PAIRS_1K,
        maxRefImages: 1,
        supportsRefImages: true,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
    {
      id: 'bfl/flux-kontext-pro',
      type: 'bfl',
      settings: { model: 'flux-kontext-pro', sizeInput: 'aspect_ratio', referenceInput: 'input_image' },
      cost: {
        rule: { per: 'image', usd: 0.04 },
        readOn: '2026-11-28',
        source: 'https://docs.bfl.ml/quick_start/pricing',
        note: '4 credits of USD 0.01 per image',
      },
      notes: 'FLUX.1 Kontext [pro]: edits one input_image; aspect_ratio',
      model: {
        resolutionsByRatio: QUEUE_PRESET_PAIRS_1K,
        maxRefImages: 1,
        supportsRefImages: true,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new BflProvider(route, upstreamDeps(route, context)),
};
