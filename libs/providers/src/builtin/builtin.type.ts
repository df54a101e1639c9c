import type { SyncProviderType } from '../provider-type';
import type { RenderResolution } from '../render.types';
import { BuiltinProvider } from './builtin.provider';

export interface BuiltinRoute {
  type: 'builtin';
  preset?: string;
}

/** The builtin renderer holds no state, so one instance serves every model routed to it. */
const shared = new BuiltinProvider();

const EVERY_PAIR = Object.fromEntries(
  ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'].map((r) => [r, ['1K', '2K', '4K'] as RenderResolution[]]),
);

/** Kiln's own placeholder renderer: local CPU work, no upstream, no key. */
export const builtinType: SyncProviderType<BuiltinRoute> = {
  type: 'builtin',
  mode: 'sync',
  summary: "Kiln's own placeholder renderer (the prompt drawn on a gradient): no upstream, no key",
  settings: [],
  keyVariable: null,
  work: 'local-cpu',
  metricsLabel: 'builtin',
  describe: () => 'builtin',
  upstreamUrl: () => null,
  presets: [
    {
      id: 'builtin/placeholder',
      type: 'builtin',
      settings: {},
      cost: {
        rule: { per: 'image', usd: 0 },
        readOn: '2026-11-28',
        source: "none: renders on the generator's own CPU",
        note: 'local CPU only',
      },
      notes: 'Renders every ratio at every resolution, exactly the asked size',
      model: {
        resolutionsByRatio: EVERY_PAIR,
        maxRefImages: null,
        supportsRefImages: true,
        supportsQuality: true,
        supportsBackground: true,
      },
    },
  ],
  create: () => shared,
};
