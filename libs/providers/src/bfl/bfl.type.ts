import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueSettings, queueTypeParts } from '../queue-route';
import { upstreamDeps } from '../route-settings';
import { fakeBfl } from './bfl.fake';
import { BFL_DEFAULTS, bflLabel, BflProvider, BflRoute } from './bfl.provider';

const RATIOS_1K: Record<string, '1K'[]> = { '1:1': ['1K'], '4:3': ['1K'], '3:4': ['1K'], '3:2': ['1K'], '2:3': ['1K'], '16:9': ['1K'], '9:16': ['1K'] };

/** Black Forest Labs' API; spec extensions v1.2 section 1. */
export const bflType: QueueProviderType<BflRoute> = {
  type: 'bfl',
  mode: 'queue',
  summary: 'Black Forest Labs: POST {baseUrl}/{model} (x-key) {prompt, width, height, seed}, poll polling_url until Ready; result.sample',
  settings: queueSettings(BFL_DEFAULTS, { modelExample: 'flux-pro-1.1', sizeInputs: ['width_height', 'aspect_ratio'] }),
  metricsLabel: 'bfl',
  ...queueTypeParts(BFL_DEFAULTS, bflLabel, () => 1024 * 1024),
  presets: [
    {
      id: 'bfl/flux-pro-1.1',
      type: 'bfl',
      settings: { model: 'flux-pro-1.1', sizeInput: 'width_height' },
      cost: { usdPerImage: { '1K': 0.04 }, readOn: '2026-11-20', note: 'as listed by Black Forest Labs' },
      notes: 'FLUX1.1 [pro]: width and height 256-1440, multiples of 32; one reference as image_prompt',
      model: { resolutionsByRatio: RATIOS_1K, maxRefImages: 1, supportsRefImages: true, supportsQuality: false, supportsBackground: false },
    },
    {
      id: 'bfl/flux-kontext-pro',
      type: 'bfl',
      settings: { model: 'flux-kontext-pro', sizeInput: 'aspect_ratio', referenceInput: 'input_image' },
      cost: { usdPerImage: { '1K': 0.04 }, readOn: '2026-11-20', note: 'as listed by Black Forest Labs' },
      notes: 'FLUX.1 Kontext [pro]: edits one input_image; aspect_ratio',
      model: { resolutionsByRatio: RATIOS_1K, maxRefImages: 1, supportsRefImages: true, supportsQuality: false, supportsBackground: false },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new BflProvider(route, upstreamDeps(route, context)),
  testing: { fake: () => fakeBfl() },
};
