import type { BatchCapableType, SyncProviderType, UpstreamRouteSettings } from '../provider-type';
import type { RenderResolution } from '../render.types';
import { costSetting, RouteCost } from '../cost';
import type { PriceRule } from '../price-rule';
import { priceSetting } from '../price-setting';
import { batchSetting, upstreamDeps, upstreamSettings } from '../route-settings';
import type { RouteBatchSettings } from '../upstream-batch';
import { GeminiBatchApi } from './gemini.batch';
import { classifyGeminiError } from './gemini.errors';
import { GeminiProvider } from './gemini.provider';
import { geminiPricing } from './gemini.price';
import { geminiMadeSize } from './gemini.sizes';

export interface GeminiRoute extends UpstreamRouteSettings {
  type: 'gemini';
  preset?: string;
  /** The operator's own price table by resolution (cost.ts); wins over `price`. */
  cost?: RouteCost;
  /** How Google bills an image (price-rule.ts): by output resolution, tokens when the answer reports usage. */
  price?: PriceRule;
  /** Economy tier through Gemini's batchGenerateContent (gemini.batch.ts). */
  batch?: Partial<RouteBatchSettings> & { enabled: boolean };
}

export const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';
const GEMINI_PRICING_PAGE = 'https://ai.google.dev/gemini-api/docs/pricing';

const shared = upstreamSettings({
  defaultBaseUrl: GEMINI_DEFAULT_BASE_URL,
  keyVariable: 'GEMINI_API_KEY',
  modelExample: 'gemini-3.1-flash-image',
});

const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
const pairs = (resolutions: RenderResolution[]) => Object.fromEntries(RATIOS.map((r) => [r, resolutions]));

/** The gemini type's batch API: batchGenerateContent over a JSONL file of the same requests a render sends. */
const geminiBatch: BatchCapableType<GeminiRoute> = {
  batchSetting: batchSetting(),
  createBatchApi: (route, settings, context) =>
    new GeminiBatchApi({
      baseUrl: route.baseUrl,
      model: route.model,
      ...upstreamDeps(route, context),
      pollIntervalMs: settings.pollIntervalMs,
    }),
};

/** Google's Gemini API (generateContent with an IMAGE answer). */
export const geminiType: SyncProviderType<GeminiRoute> = {
  type: 'gemini',
  mode: 'sync',
  summary:
    'Google Gemini API: POST {baseUrl}/models/{model}:generateContent, header x-goog-api-key; references as inlineData; the nearest of its ten ratios, imageSize on 3.x models',
  settings: [
    shared.baseUrl,
    shared.model,
    shared.apiKeyEnv,
    shared.timeoutMs,
    shared.maxConcurrency,
    shared.ratePerMinute,
    costSetting({ bySize: false }),
    priceSetting(geminiPricing),
    geminiBatch.batchSetting,
  ],
  batch: geminiBatch,
  keyVariable: 'GEMINI_API_KEY',
  work: 'upstream',
  metricsLabel: 'gemini',
  pricing: geminiPricing,
  describe: (route) => `gemini ${route.baseUrl} (${route.model})`,
  upstreamUrl: (route) => route.baseUrl,
  sizeFor: (route, asked) => geminiMadeSize(route.model, asked, asked.resolution),
  classifyError: classifyGeminiError,
  presets: [
    {
      id: 'gemini/gemini-3.1-flash-image',
      type: 'gemini',
      settings: { baseUrl: GEMINI_DEFAULT_BASE_URL, model: 'gemini-3.1-flash-image' },
      cost: {
        rule: {
          per: 'resolution',
          usd: { '1K': 0.067, '2K': 0.101, '4K': 0.151 },
          tokens: { input: 0.5, output: 60, outputText: 3 },
          economyFactor: 0.5,
        },
        readOn: '2026-11-28',
        source: GEMINI_PRICING_PAGE,
        unconfirmed: [
          "Google's own page could not be read: USD 60 per million image output tokens (1120 for a 1K image) as copies of it show it",
          'input USD 0.5 and text output USD 3 per million tokens (copies disagree: 0.25 to 0.5 input)',
        ],
        note: 'batch mode half of it',
      },
      notes: 'Generally available since 2026-05-28; one image per request, up to 14 references',
      model: {
        resolutionsByRatio: pairs(['1K', '2K', '4K']),
        maxRefImages: 14,
        supportsRefImages: true,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
    {
      id: 'gemini/gemini-3-pro-image',
      type: 'gemini',
      settings: { baseUrl: GEMINI_DEFAULT_BASE_URL, model: 'gemini-3-pro-image' },
      cost: {
        rule: {
          per: 'resolution',
          usd: { '1K': 0.134, '2K': 0.134, '4K': 0.24 },
          tokens: { input: 2, output: 120, outputText: 12 },
          economyFactor: 0.5,
        },
        readOn: '2026-11-28',
        source: GEMINI_PRICING_PAGE,
        unconfirmed: [
          "Google's own page could not be read: the per-image prices as copies of it show them",
          'token prices (input USD 2, image output USD 120, text output USD 12 per million)',
        ],
        note: 'batch mode half of it',
      },
      notes: 'The pro model: better text rendering and composition, slower',
      model: {
        resolutionsByRatio: pairs(['1K', '2K', '4K']),
        maxRefImages: 14,
        supportsRefImages: true,
        supportsQuality: false,
        supportsBackground: false,
      },
    },
  ],
  create: (route, context) => new GeminiProvider({ baseUrl: route.baseUrl, model: route.model, ...upstreamDeps(route, context) }),
};
