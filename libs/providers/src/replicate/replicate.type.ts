import type { ProviderPreset, QueueProviderType } from '../provider-type';
import { queueSettings, queueTypeParts } from '../queue-route';
import { upstreamDeps } from '../route-settings';
import { fakeReplicate } from './replicate.fake';
import { REPLICATE_DEFAULTS, replicateLabel, ReplicateProvider, ReplicateRoute } from './replicate.provider';

const RATIOS_1K: Record<string, '1K'[]> = { '1:1': ['1K'], '4:3': ['1K'], '3:4': ['1K'], '3:2': ['1K'], '2:3': ['1K'], '16:9': ['1K'], '9:16': ['1K'] };

/** Replicate's predictions API on an official model (owner/name); spec extensions v1.2 section 1. */
export const replicateType: QueueProviderType<ReplicateRoute> = {
  type: 'replicate',
  mode: 'queue',
  summary: 'Replicate: POST {baseUrl}/models/{owner}/{name}/predictions {input} (Authorization: Bearer), poll urls.get until succeeded; output a URL or a list',
  settings: queueSettings(REPLICATE_DEFAULTS, { modelExample: 'black-forest-labs/flux-schnell', sizeInputs: ['aspect_ratio', 'width_height'] }).map((s) =>
    s.name === 'model'
      ? { ...s, check: (v: unknown) => (typeof v === 'string' && /^[a-z0-9][\w.-]*\/[\w.-]+$/i.test(v) ? null : 'not_owner_slash_name') }
      : s,
  ),
  metricsLabel: 'replicate',
  ...queueTypeParts(REPLICATE_DEFAULTS, replicateLabel, () => 1024 * 1024),
  presets: [
    {
      id: 'replicate/black-forest-labs/flux-schnell',
      type: 'replicate',
      settings: { model: 'black-forest-labs/flux-schnell', sizeInput: 'aspect_ratio' },
      cost: { usdPerImage: { '1K': 0.003 }, readOn: '2026-11-20', note: 'as listed by Replicate' },
      notes: 'FLUX.1 [schnell]: aspect_ratio, about 1 megapixel; no reference input',
      model: { resolutionsByRatio: RATIOS_1K, maxRefImages: 0, supportsRefImages: false, supportsQuality: false, supportsBackground: false },
    },
    {
      id: 'replicate/black-forest-labs/flux-1.1-pro',
      type: 'replicate',
      settings: { model: 'black-forest-labs/flux-1.1-pro', sizeInput: 'aspect_ratio', referenceInput: 'image_prompt' },
      cost: { usdPerImage: { '1K': 0.04 }, readOn: '2026-11-20', note: 'as listed by Replicate' },
      notes: 'FLUX1.1 [pro]: aspect_ratio; one reference as image_prompt',
      model: { resolutionsByRatio: RATIOS_1K, maxRefImages: 1, supportsRefImages: true, supportsQuality: false, supportsBackground: false },
    },
  ] satisfies ProviderPreset[],
  create: (route, context) => new ReplicateProvider(route, upstreamDeps(route, context)),
  testing: { fake: () => fakeReplicate() },
};
