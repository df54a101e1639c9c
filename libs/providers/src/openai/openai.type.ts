import type { ProviderContext, SyncProviderType, UpstreamRouteSettings } from '../provider-type';
import { costSetting, RouteCost } from '../cost';
import { checks, upstreamDeps, upstreamSettings } from '../route-settings';
import { batchSetting, BatchCapableType, RouteBatchSettings } from '../upstream-batch';
import { OpenAiBatchApi } from './openai.batch';
import { classifyOpenAiError } from './openai.errors';
import { OpenAiFakeUpstream } from './openai.fake';
import { OpenAiProvider, OpenAiProviderConfig } from './openai.provider';
import { openAiMadeSize, openAiUpstreamSize } from './openai.sizes';

export interface OpenAiRoute extends UpstreamRouteSettings {
  type: 'openai';
  preset?: string;
  /** Kiln "WxH" -> upstream size string; when absent, a known model's legal size or the exact pixel size is sent. */
  sizeMap?: Record<string, string>;
  /** List price per image, by resolution or by upstream size and quality (cost.ts). */
  cost?: RouteCost;
  /** Economy tier through the OpenAI Batch API (openai.batch.ts). */
  batch?: Partial<RouteBatchSettings> & { enabled: boolean };
}

export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';

const shared = upstreamSettings({ defaultBaseUrl: OPENAI_DEFAULT_BASE_URL, keyVariable: 'OPENAI_API_KEY', modelExample: 'gpt-image-1' });

/** What the provider and the batch API are both built with for a route. */
function openAiConfig(route: OpenAiRoute, context: ProviderContext): OpenAiProviderConfig {
  return { baseUrl: route.baseUrl, model: route.model, sizeMap: route.sizeMap, upstreamSize: (asked) => openAiUpstreamSize(route, asked), ...upstreamDeps(route, context) };
}

/** What gpt-image-1, -1-mini and -1.5 make honestly: 1024x1024, 1536x1024, 1024x1536, so 1:1, 3:2 and 2:3 at 1K. */
const GPT_IMAGE_1_PAIRS: Record<string, ('1K' | '2K' | '4K')[]> = { '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] };
const GPT_IMAGE_MODEL = { resolutionsByRatio: GPT_IMAGE_1_PAIRS, maxRefImages: 16, supportsRefImages: true, supportsQuality: true, supportsBackground: true };

/**
 * The openai type's batch API: the OpenAI Batch API on the route's baseUrl, with the same
 * request mapping as a render (tasks with reference images are refused: see openai.batch.ts).
 */
const openaiBatch: BatchCapableType<OpenAiRoute> = {
  batchSetting: batchSetting(),
  createBatchApi: (route, settings, context) =>
    new OpenAiBatchApi({ ...openAiConfig(route, context), pollIntervalMs: settings.pollIntervalMs }),
};

/** Any OpenAI-compatible images endpoint (OpenAI itself, or a compatible server). */
export const openaiType: SyncProviderType<OpenAiRoute> = {
  type: 'openai',
  mode: 'sync',
  summary: 'Any OpenAI-compatible images endpoint: POST {baseUrl}/images/generations, /images/edits with references; Authorization: Bearer',
  settings: [
    shared.baseUrl,
    shared.model,
    shared.apiKeyEnv,
    {
      name: 'sizeMap',
      required: false,
      description:
        'Kiln "WxH" -> the upstream size string to send instead. Without an entry, gpt-image-1/-1-mini/-1.5 get their nearest legal size (ratio, then area) and other models the exact "WxH"',
      check: checks.sizeMap,
    },
    shared.timeoutMs,
    shared.maxConcurrency,
    shared.ratePerMinute,
    costSetting({ bySize: true }),
    openaiBatch.batchSetting,
  ],
  batch: openaiBatch,
  keyVariable: 'OPENAI_API_KEY',
  work: 'upstream',
  metricsLabel: 'openai',
  describe: (route) => `openai ${route.baseUrl} (${route.model})`,
  upstreamUrl: (route) => route.baseUrl,
  sizeFor: (route, asked) => openAiMadeSize(route, asked),
  classifyError: classifyOpenAiError,
  presets: [
    {
      id: 'openai/gpt-image-1',
      type: 'openai',
      settings: { baseUrl: OPENAI_DEFAULT_BASE_URL, model: 'gpt-image-1' },
      cost: {
        usdPerImage: { '1K': 0.042 },
        economyUsdPerImage: { '1K': 0.021 },
        readOn: '2026-11-20',
        note: 'medium quality, 1024x1024; low 0.011, high 0.167; 1536x1024 costs about 1.5 x; the Batch API half of it',
      },
      model: GPT_IMAGE_MODEL,
    },
    {
      id: 'openai/gpt-image-1-mini',
      type: 'openai',
      settings: { baseUrl: OPENAI_DEFAULT_BASE_URL, model: 'gpt-image-1-mini' },
      cost: { usdPerImage: { '1K': 0.011 }, economyUsdPerImage: { '1K': 0.0055 }, readOn: '2026-11-20', note: 'medium quality, 1024x1024; low 0.005, high 0.036; the Batch API half of it' },
      retiresAt: '2026-12-01',
      notes: 'OpenAI announced its shutdown for 2026-12-01',
      model: GPT_IMAGE_MODEL,
    },
  ],
  create: (route, context) =>
    new OpenAiProvider(openAiConfig(route, context)),
  testing: { fake: () => new OpenAiFakeUpstream() },
};
