import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueSettings, queueTypeParts } from '../queue-route';
import type { RenderResolution } from '../render.types';
import { upstreamDeps } from '../route-settings';
import { REPLICATE_DEFAULTS, replicateLabel, ReplicateProvider, ReplicateRoute } from './replicate.provider';
import { replicateMadeSize } from './replicate.sizes';

/**
 * FLUX.1 [schnell] takes only aspect_ratio (and megapixels), and makes 4:3, 3:4, 4:5 and 5:4
 * 3-5 % off those ratios (replicate.sizes.ts): the ratios it makes honestly, at 1K.
 */
const FLUX_SCHNELL_PAIRS: Record<string, RenderResolution[]> = {
  '1:1': ['1K'],
  '2:3': ['1K'],
  '3:2': ['1K'],
  '9:16': ['1K'],
  '16:9': ['1K'],
  '21:9': ['1K'],
};

/** Exact sizes within 256-1440 px: every ratio at 1K (2K would be scaled to under half its area). */
const EXACT_1K_PAIRS: Record<string, RenderResolution[]> = Object.fromEntries(
  ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'].map((r) => [r, ['1K']]),
);
import { replicatePricing } from './replicate.price';

/** Replicate's predictions API on an official model (owner/name); spec extensions v1.2 section 1. */
export const replicateType: QueueProviderType<ReplicateRoute> = {
  type: 'replicate',
  mode: 'queue',
  summary:
    'Replicate: POST {baseUrl}/models/{owner}/{name}/predictions {input} (Authorization: Bearer), poll urls.get until succeeded; output a URL or a list',
  settings: queueSettings(REPLICATE_DEFAULTS, {
    modelExample: 'black-forest-labs/flux-schnell',
    sizeInputs: ['aspect_ratio', 'width_height', 'aspect_ratio_custom'],
    pricing: replicatePricing,
  }).map((s) =>
    s.name === 'model'
      ? { ...s, check: (v: unknown) => (typeof v === 'string' && /^[a-z0-9][\w.-]*\/[\w.-]+$/i.test(v) ? null : 'not_owner_slash_name') }
      : s,
  ),
  metricsLabel: 'replicate',
  pricing: replicatePricing,
  cancelsUpstream: true,
  ...queueTypeParts(REPLICATE_DEFAULTS, replicateLabel, () => 1024 * 1024),
  // FLUX on Replicate makes its own size per aspect_ratio, not the exact ratio (replicate.sizes.ts).
  sizeFor: (route, asked) => replicateMadeSize(route, asked),
  presets: [
    {
      id: 'replicate/black-forest-labs/flux-schnell',
      type: 'replicate',
      settings: { model: 'black-forest-labs/flux-schnell', sizeInput: 'aspect_ratio' },
      cost: {
        rule: { per: 'image', usd: 0.003 },
        readOn: '2026-11-28',
        source: 'https://replicate.com/black-forest-labs/flux-schnell',
        note: 'USD 3 per thousand output images',
      },
      notes: 'FLUX.1 [schnell]: aspect_ratio only (its own size per ratio, about 1 megapixel); no reference input',
      model: {
        resolutionsByRatio: FLUX_SCHNELL_PAIRS,
        maxRefImages: 0,
        supportsRefImages: false,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
    {
      id: 'replicate/black-forest-labs/flux-1.1-pro',
      type: 'replicate',
      settings: { model: 'black-forest-labs/flux-1.1-pro', sizeInput: 'aspect_ratio_custom', referenceInput: 'image_prompt' },
      cost: {
        rule: { per: 'image', usd: 0.04 },
        readOn: '2026-11-28',
        source: 'https://replicate.com/black-forest-labs/flux-1.1-pro',
        unconfirmed: ['USD 0.04 per image (seen in listings of the model, not on its page)'],
      },
      notes: 'FLUX1.1 [pro]: aspect_ratio "custom" with width and height (256-1440, multiples of 32); one reference as image_prompt',
      model: {
        resolutionsByRatio: EXACT_1K_PAIRS,
        maxRefImages: 1,
        supportsRefImages: true,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new ReplicateProvider(route, upstreamDeps(route, context)),
};
