export * from './render.types';
export * from './provider-type';
export {
  PROVIDER_TYPES,
  PROVIDER_TYPE_NAMES,
  UPSTREAM_KEY_VARIABLES,
  UPSTREAM_CANCEL_TYPES,
  providerType,
  allPresets,
  validateRoute,
  withDefaults,
  requiredKey,
  routeLabel,
  metricsLabel,
  upstreamUrl,
  rendersOnCpu,
  billsFailure,
  routeShapes,
  routeTypesInBrief,
  presetById,
  expandRoute,
  pairsRouteCannotMake,
  routeWarnings,
  providerCatalog,
  RETIREMENT_WARNING_DAYS,
} from './provider-types.registry';
export type { RouteWarning } from './provider-types.registry';
export { isHonest, nearestSize } from './size-rules';
export type { ProviderRoute, ProviderTypeName } from './provider-types.registry';
export { pixelSize, parseAspectRatio } from './image-size';
export { costSetting, MAX_USD_PER_IMAGE } from './cost';
export type { RouteCost } from './cost';
export { upstreamCostMicros, upstreamCostUsd, pairPriceUsd } from './route-price';
export { describePriceRule, checkPriceRule, billedMegapixels, PRICE_KINDS } from './price-rule';
export type { PriceRule, PriceKind, PresetPrice, MadeImage, TokenUsage, TokenPrices, TypePricing } from './price-rule';
export type { PixelSize } from './image-size';
export { BuiltinProvider } from './builtin/builtin.provider';
export { OpenAiProvider } from './openai/openai.provider';
export type { OpenAiProviderConfig } from './openai/openai.provider';
export type { OpenAiRoute } from './openai/openai.type';
export { openAiUpstreamSize } from './openai/openai.sizes';
export { GeminiProvider } from './gemini/gemini.provider';
export type { GeminiProviderConfig } from './gemini/gemini.provider';
export type { GeminiRoute } from './gemini/gemini.type';
export { SimulatedProvider, SIMULATED_LONG_EDGE } from './simulated/simulated.provider';
export type { SimulatedProviderConfig } from './simulated/simulated.provider';
export { createProvider } from './provider.factory';
export type { ProviderFactoryDeps } from './provider.factory';
export { sniffImageType } from './provider.utils';
export { builtinFontRenders, BUILTIN_FONT } from './builtin/builtin-fonts';
export { createQueueProvider } from './provider.factory';
export type { QueueRouteSettings, QueueProviderDeps } from './queue-route';
export { DEFAULT_MAX_WAIT_MS, DEFAULT_ON_UNKNOWN_SUBMIT, DEFAULT_POLL_INTERVAL_MS } from './queue-route';
export { fitPixels, nearestRatio } from './queue-sizes';
export type { PixelRange } from './queue-sizes';
export { FalProvider, FAL_DEFAULTS } from './fal/fal.provider';
export type { FalRoute } from './fal/fal.provider';
export { ReplicateProvider, REPLICATE_DEFAULTS } from './replicate/replicate.provider';
export type { ReplicateRoute } from './replicate/replicate.provider';
export { BflProvider, BFL_DEFAULTS } from './bfl/bfl.provider';
export type { BflRoute } from './bfl/bfl.provider';
export { BATCH_DEFAULTS, routeBatchSettings } from './upstream-batch';
export { batchSetting } from './route-settings';
export { createBatchApi, hasBatchApi } from './provider.factory';
export { SimulatedBatchApi, SIMULATED_BATCH_MARKERS, SIMULATED_BATCH_HANG_STEPS } from './simulated/simulated.batch';
export type { SimulatedBatchHangStep } from './simulated/simulated.batch';
export type {
  BatchObjectStore,
  UpstreamBatchApi,
  UpstreamBatchLine,
  UpstreamBatchRef,
  UpstreamBatchStatus,
  UpstreamBatchResult,
  RouteBatchSettings,
} from './upstream-batch';
export { OpenAiBatchApi, OPENAI_BATCH_GROUP_KEY, OPENAI_BATCH_MAX_BYTES, OPENAI_BATCH_MAX_LINES } from './openai/openai.batch';
export type { OpenAiBatchConfig } from './openai/openai.batch';
export { GeminiBatchApi, GEMINI_BATCH_MAX_BYTES, GEMINI_BATCH_MAX_LINES } from './gemini/gemini.batch';
export type { GeminiBatchConfig } from './gemini/gemini.batch';
export { FAILOVER_KINDS, FAILOVER_DEFAULTS, MAX_ROUTES, failoverOf, mergeFailover } from './failover';
export type { FailoverKind, FailoverSettings } from './failover';
