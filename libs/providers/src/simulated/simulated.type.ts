import type { BatchCapableType, SyncProviderType } from '../provider-type';
import { costSetting, RouteCost } from '../cost';
import type { PriceRule } from '../price-rule';
import { priceSetting } from '../price-setting';
import { simulatedPricing } from './simulated.price';
import { batchSetting, checks, upstreamSettings } from '../route-settings';
import type { RouteBatchSettings } from '../upstream-batch';
import { SimulatedBatchApi } from './simulated.batch';
import { SimulatedProvider } from './simulated.provider';

export interface SimulatedRoute {
  type: 'simulated';
  preset?: string;
  latencyMs?: number | { min: number; max: number };
  failureRate?: number;
  rateLimitRate?: number;
  /** As the openai route's. */
  maxConcurrency?: number;
  /** As the openai route's. */
  ratePerMinute?: number;
  /** What the stood-in upstream would cost (cost.ts), so the usage report can be tried offline. */
  cost?: RouteCost;
  /** A price rule of any kind (price-rule.ts), as a stood-in upstream might bill. */
  price?: PriceRule;
  /** Economy tier through the local batch API (simulated.batch.ts); `delayMs`: how long a batch takes. */
  batch?: Partial<RouteBatchSettings> & { enabled: boolean };
}

/** The simulated type's batch API: local, its state in Kiln's object storage (ProviderContext.batchObjects). */
const simulatedBatch: BatchCapableType<SimulatedRoute> = {
  batchSetting: batchSetting({ delayMs: true }),
  createBatchApi: (route, settings, context) => SimulatedBatchApi.of(route, settings, context.batchObjects, context.simulatedBatchHangAt),
};

const latency = (l: unknown): string | null =>
  (typeof l === 'number' && l >= 0) ||
  (typeof l === 'object' &&
    l !== null &&
    typeof (l as { min: unknown }).min === 'number' &&
    typeof (l as { max: unknown }).max === 'number' &&
    (l as { min: number }).min >= 0 &&
    (l as { max: number }).max >= (l as { min: number }).min)
    ? null
    : 'invalid';

/** For tests and benchmarks: an upstream stand-in with latency and failure rates, rendering tiny real PNGs locally. */
export const simulatedType: SyncProviderType<SimulatedRoute> = {
  type: 'simulated',
  mode: 'sync',
  summary:
    'For tests and benchmarks: waits a latency, fails or rate-limits at the given rates, else returns a small real PNG (longer side 64 px)',
  settings: [
    {
      name: 'latencyMs',
      required: false,
      default: 0,
      description: 'A fixed latency in ms, or { min, max } drawn uniformly',
      check: latency,
    },
    {
      name: 'failureRate',
      required: false,
      default: 0,
      description: 'Probability (0..1) of a non-retryable upstream failure',
      check: checks.rate,
    },
    { name: 'rateLimitRate', required: false, default: 0, description: 'Probability (0..1) of a retryable 429', check: checks.rate },
    upstreamSettings({ keyVariable: '', modelExample: '' }).maxConcurrency,
    upstreamSettings({ keyVariable: '', modelExample: '' }).ratePerMinute,
    costSetting({ bySize: false }),
    priceSetting(simulatedPricing),
    simulatedBatch.batchSetting,
  ],
  batch: simulatedBatch,
  keyVariable: null,
  work: 'upstream',
  metricsLabel: 'simulated',
  pricing: simulatedPricing,
  describe: () => 'simulated',
  upstreamUrl: () => null,
  presets: [
    {
      id: 'simulated/realistic',
      type: 'simulated',
      settings: { latencyMs: { min: 2000, max: 8000 }, failureRate: 0.01, rateLimitRate: 0.02 },
      notes: 'About the latency and failure rates of a hosted image model, for load tests',
      model: {
        resolutionsByRatio: Object.fromEntries(['1:1', '2:3', '3:2', '9:16', '16:9'].map((r) => [r, ['1K', '2K'] as ('1K' | '2K')[]])),
        maxRefImages: null,
        supportsRefImages: true,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
  ],
  create: (route, context) =>
    new SimulatedProvider(
      { latencyMs: route.latencyMs, failureRate: route.failureRate, rateLimitRate: route.rateLimitRate },
      context.random,
    ),
};
