import type { BatchCapableType, ProviderContext, SyncProviderType, UpstreamRouteSettings } from '../provider-type';
import type { RenderResolution } from '../render.types';
import { costSetting, RouteCost } from '../cost';
import type { PresetPrice, PriceRule } from '../price-rule';
import { priceSetting } from '../price-setting';
import { batchSetting, checks, upstreamDeps, upstreamSettings } from '../route-settings';
import type { RouteBatchSettings } from '../upstream-batch';
import { OpenAiBatchApi } from './openai.batch';
import { classifyOpenAiError } from './openai.errors';
import { OpenAiProvider, OpenAiProviderConfig } from './openai.provider';
import { openAiPricing } from './openai.price';
import { openAiMadeSize, openAiUpstreamSize } from './openai.sizes';

export interface OpenAiRoute extends UpstreamRouteSettings {
  type: 'openai';
  preset?: string;
  /** Kiln "WxH" -> upstream size string; when absent, a known model's legal size or the exact pixel size is sent. */
  sizeMap?: Record<string, string>;
  /** The operator's own price table, by resolution or by upstream size and quality (cost.ts); wins over `price`. */
  cost?: RouteCost;
  /** How OpenAI bills an image (price-rule.ts): size x quality, tokens when the answer reports usage. */
  price?: PriceRule;
  /** Economy tier through the OpenAI Batch API (openai.batch.ts). */
  batch?: Partial<RouteBatchSettings> & { enabled: boolean };
}

export const OPENAI_DEFAULT_BASE_URL = 'https://api.openai.com/v1';

const shared = upstreamSettings({ defaultBaseUrl: OPENAI_DEFAULT_BASE_URL, keyVariable: 'OPENAI_API_KEY', modelExample: 'gpt-image-1' });

/** What the provider and the batch API are both built with for a route. */
function openAiConfig(route: OpenAiRoute, context: ProviderContext): OpenAiProviderConfig {
  return {
    baseUrl: route.baseUrl,
    model: route.model,
    sizeMap: route.sizeMap,
    upstreamSize: (asked) => openAiUpstreamSize(route, asked),
    ...upstreamDeps(route, context),
  };
}

/** What gpt-image-1, -1-mini and -1.5 make honestly: 1024x1024, 1536x1024, 1024x1536, so 1:1, 3:2 and 2:3 at 1K. */
const GPT_IMAGE_1_PAIRS: Record<string, RenderResolution[]> = { '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] };
const GPT_IMAGE_MODEL = {
  resolutionsByRatio: GPT_IMAGE_1_PAIRS,
  maxRefImages: 16,
  supportsRefImages: true,
  supportsQuality: true,
  supportsBackground: true,
};

const OPENAI_PRICING_PAGE = 'https://platform.openai.com/docs/pricing';
const OPENAI_PAGE_UNREAD = "OpenAI's own page could not be read: the figures are its table as public copies of it show it";

/** gpt-image-1: OpenAI's table of size x quality, its token prices (USD per million), the Batch API at half. */
const GPT_IMAGE_1_PRICE: PresetPrice = {
  rule: {
    per: 'size',
    usd: {
      '1024x1024': { low: 0.011, medium: 0.042, high: 0.167 },
      '1024x1536': { low: 0.016, medium: 0.063, high: 0.25 },
      '1536x1024': { low: 0.016, medium: 0.063, high: 0.25 },
    },
    tokens: { input: 5, inputImage: 10, output: 40 },
    economyFactor: 0.5,
  },
  readOn: '2026-11-28',
  source: OPENAI_PRICING_PAGE,
  unconfirmed: [OPENAI_PAGE_UNREAD, 'the Batch API at half price for images'],
  note: 'quality auto is priced as high: OpenAI chooses',
};

/** gpt-image-1-mini, as gpt-image-1. */
const GPT_IMAGE_1_MINI_PRICE: PresetPrice = {
  rule: {
    per: 'size',
    usd: {
      '1024x1024': { low: 0.005, medium: 0.011, high: 0.036 },
      '1024x1536': { low: 0.006, medium: 0.015, high: 0.052 },
      '1536x1024': { low: 0.006, medium: 0.015, high: 0.052 },
    },
    tokens: { input: 2, inputImage: 2.5, output: 8 },
    economyFactor: 0.5,
  },
  readOn: '2026-11-28',
  source: OPENAI_PRICING_PAGE,
  unconfirmed: [
    OPENAI_PAGE_UNREAD,
    'the 1024x1536 and 1536x1024 prices',
    'input token prices (2 text, 2.5 image)',
    'the Batch API at half price for images',
  ],
  note: 'quality auto is priced as high: OpenAI chooses',
};

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
    priceSetting(openAiPricing),
    openaiBatch.batchSetting,
  ],
  batch: openaiBatch,
  keyVariable: 'OPENAI_API_KEY',
  work: 'upstream',
  metricsLabel: 'openai',
  pricing: openAiPricing,
  describe: (route) => `openai ${route.baseUrl} (${route.model})`,
  upstreamUrl: (route) => route.baseUrl,
  sizeFor: (route, asked) => openAiMadeSize(route, asked),
  classifyError: classifyOpenAiError,
  presets: [
    {
      id: 'openai/gpt-image-1',
      type: 'openai',
      settings: { baseUrl: OPENAI_DEFAULT_BASE_URL, model: 'gpt-image-1' },
      cost: GPT_IMAGE_1_PRICE,
      model: GPT_IMAGE_MODEL,
    },
    {
      id: 'openai/gpt-image-1-mini',
      type: 'openai',
      settings: { baseUrl: OPENAI_DEFAULT_BASE_URL, model: 'gpt-image-1-mini' },
      cost: GPT_IMAGE_1_MINI_PRICE,
      retiresAt: '2026-12-01',
      notes: 'OpenAI announced its shutdown for 2026-12-01',
      model: GPT_IMAGE_MODEL,
    },
  ],
  create: (route, context) => new OpenAiProvider(openAiConfig(route, context)),
};
