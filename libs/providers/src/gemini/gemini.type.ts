import type { SyncProviderType, UpstreamRouteSettings } from '../provider-type';
import { costSetting, RouteCost } from '../cost';
import { upstreamDeps, upstreamSettings } from '../route-settings';
import { batchSetting, BatchCapableType, RouteBatchSettings } from '../upstream-batch';
import { GeminiBatchApi } from './gemini.batch';
import { classifyGeminiError } from './gemini.errors';
import { GeminiFakeUpstream } from './gemini.fake';
import { GeminiProvider } from './gemini.provider';
import { geminiMadeSize } from './gemini.sizes';

export interface GeminiRoute extends UpstreamRouteSettings {
  type: 'gemini';
  preset?: string;
  /** List price per image by resolution (cost.ts). */
  cost?: RouteCost;
  /** Economy tier through Gemini's batchGenerateContent (gemini.batch.ts). */
  batch?: Partial<RouteBatchSettings> & { enabled: boolean };
}

export const GEMINI_DEFAULT_BASE_URL = 'https://generativelanguage.googleapis.com/v1beta';

const shared = upstreamSettings({ defaultBaseUrl: GEMINI_DEFAULT_BASE_URL, keyVariable: 'GEMINI_API_KEY', modelExample: 'gemini-3.1-flash-image' });

const RATIOS = ['1:1', '2:3', '3:2', '3:4', '4:3', '4:5', '5:4', '9:16', '16:9', '21:9'];
const pairs = (resolutions: ('1K' | '2K' | '4K')[]) => Object.fromEntries(RATIOS.map((r) => [r, resolutions]));

/** The gemini type's batch API: batchGenerateContent over a JSONL file of the same requests a render sends. */
const geminiBatch: BatchCapableType<GeminiRoute> = {
  batchSetting: batchSetting(),
  createBatchApi: (route, settings, context) =>
    new GeminiBatchApi({ baseUrl: route.baseUrl, model: route.model, ...upstreamDeps(route, context), pollIntervalMs: settings.pollIntervalMs }),
};

/** Google's Gemini API (generateContent with an IMAGE answer). */
export const geminiType: SyncProviderType<GeminiRoute> = {
  type: 'gemini',
  mode: 'sync',
  summary:
    'Google Gemini API: POST {baseUrl}/models/{model}:generateContent, header x-goog-api-key; references as inlineData; the nearest of its ten ratios, imageSize on 3.x models',
  settings: [shared.baseUrl, shared.model, shared.apiKeyEnv, shared.timeoutMs, shared.maxConcurrency, shared.ratePerMinute, costSetting({ bySize: false }), geminiBatch.batchSetting],
  batch: geminiBatch,
  keyVariable: 'GEMINI_API_KEY',
  work: 'upstream',
  metricsLabel: 'gemini',
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
        usdPerImage: { '1K': 0.039, '2K': 0.039, '4K': 0.078 },
        economyUsdPerImage: { '1K': 0.0195, '2K': 0.0195, '4K': 0.039 },
        readOn: '2026-11-20',
        note: 'list price per output image, November 2026; batch mode half of it',
      },
      notes: 'Generally available since 2026-05-28; one image per request, up to 14 references',
      model: { resolutionsByRatio: pairs(['1K', '2K', '4K']), maxRefImages: 14, supportsRefImages: true, supportsQuality: false, supportsBackground: false },
    },
    {
      id: 'gemini/gemini-3-pro-image',
      type: 'gemini',
      settings: { baseUrl: GEMINI_DEFAULT_BASE_URL, model: 'gemini-3-pro-image' },
      cost: {
        usdPerImage: { '1K': 0.134, '2K': 0.134, '4K': 0.24 },
        economyUsdPerImage: { '1K': 0.067, '2K': 0.067, '4K': 0.12 },
        readOn: '2026-11-20',
        note: 'list price per output image, November 2026; batch mode half of it',
      },
      notes: 'The pro model: better text rendering and composition, slower',
      model: { resolutionsByRatio: pairs(['1K', '2K', '4K']), maxRefImages: 14, supportsRefImages: true, supportsQuality: false, supportsBackground: false },
    },
  ],
  create: (route, context) =>
    new GeminiProvider({ baseUrl: route.baseUrl, model: route.model, ...upstreamDeps(route, context) }),
  testing: { fake: () => new GeminiFakeUpstream() },
};
