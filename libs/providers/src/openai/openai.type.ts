import type { SyncProviderType, UpstreamRouteSettings } from '../provider-type';
import { checks, upstreamSettings } from '../route-settings';
import { OpenAiFakeUpstream } from './openai.fake';
import { OpenAiProvider } from './openai.provider';

export interface OpenAiRoute extends UpstreamRouteSettings {
  type: 'openai';
  preset?: string;
  /** Kiln "WxH" -> upstream size string; when absent the exact pixel size is sent. */
  sizeMap?: Record<string, string>;
}

const shared = upstreamSettings({ keyVariable: 'OPENAI_API_KEY', modelExample: 'gpt-image-1' });

/** gpt-image-1, -1-mini and -1.5 make these three sizes and nothing else. */
const GPT_IMAGE_PAIRS = { '1:1': ['1K'], '2:3': ['1K'], '3:2': ['1K'] } as Record<string, ('1K' | '2K' | '4K')[]>;

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
      description: 'Kiln "WxH" -> the upstream size string to send instead; sizes not listed are sent as "WxH"',
      check: checks.anything,
    },
    shared.timeoutMs,
    shared.maxConcurrency,
  ],
  keyVariable: 'OPENAI_API_KEY',
  work: 'upstream',
  metricsLabel: 'openai',
  describe: (route) => `openai ${route.baseUrl} (${route.model})`,
  upstreamUrl: (route) => route.baseUrl,
  presets: [
    {
      id: 'openai/gpt-image-1',
      type: 'openai',
      settings: { baseUrl: 'https://api.openai.com/v1', model: 'gpt-image-1' },
      model: { resolutionsByRatio: GPT_IMAGE_PAIRS, maxRefImages: 16, supportsRefImages: true, supportsQuality: true, supportsBackground: true },
    },
    {
      id: 'openai/gpt-image-1-mini',
      type: 'openai',
      settings: { baseUrl: 'https://api.openai.com/v1', model: 'gpt-image-1-mini' },
      retiresAt: '2026-12-01',
      model: { resolutionsByRatio: GPT_IMAGE_PAIRS, maxRefImages: 16, supportsRefImages: true, supportsQuality: true, supportsBackground: true },
    },
  ],
  create: (route, context) =>
    new OpenAiProvider({
      baseUrl: route.baseUrl,
      apiKey: context.apiKey,
      model: route.model,
      sizeMap: route.sizeMap,
      timeoutMs: route.timeoutMs ?? context.timeoutMs,
      allowPrivate: context.upstream.allowPrivate,
      maxImageBytes: context.upstream.maxImageBytes,
    }),
  testing: { fake: () => new OpenAiFakeUpstream() },
};
