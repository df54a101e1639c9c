export * from './provider.types';
export * from './provider-type';
export {
  PROVIDER_TYPES,
  PROVIDER_TYPE_NAMES,
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
} from './registry';
export type { RouteWarning } from './registry';
export { isHonest, nearestSize } from './size-rules';
export type { ProviderRoute, ProviderTypeName } from './registry';
export { pixelSize, parseAspectRatio } from './image-size';
export { costSetting, upstreamCostMicros, MAX_USD_PER_IMAGE } from './cost';
export type { RouteCost, MadeImage } from './cost';
export type { PixelSize } from './image-size';
export { BuiltinProvider } from './builtin/builtin.provider';
export { OpenAiProvider } from './openai/openai.provider';
export type { OpenAiProviderConfig } from './openai/openai.provider';
export type { OpenAiRoute } from './openai/openai.type';
export { GeminiProvider } from './gemini/gemini.provider';
export type { GeminiProviderConfig } from './gemini/gemini.provider';
export type { GeminiRoute } from './gemini/gemini.type';
export { GeminiFakeUpstream } from './gemini/gemini.fake';
export { OpenAiFakeUpstream } from './openai/openai.fake';
export { SimulatedProvider, SIMULATED_LONG_EDGE } from './simulated/simulated.provider';
export type { SimulatedProviderConfig } from './simulated/simulated.provider';
export { createProvider } from './provider.factory';
export type { ProviderFactoryDeps } from './provider.factory';
export { sniffImageType } from './provider.utils';
export { builtinFontRenders, BUILTIN_FONT } from './builtin/builtin-fonts';
export { FakeHttpUpstream, fakePng } from './fake-upstream';
export { RateLimitedOpenAiFake } from './openai/openai-rate-limited.fake';
export type { StrictLimits } from './openai/openai-rate-limited.fake';
export { createQueueProvider } from './provider.factory';
export type { QueueRouteSettings, QueueProviderDeps } from './queue-route';
export { DEFAULT_MAX_WAIT_MS, DEFAULT_POLL_INTERVAL_MS } from './queue-route';
export { fitPixels, nearestRatio } from './queue-sizes';
export type { PixelRange } from './queue-sizes';
export { FalProvider, FAL_DEFAULTS } from './fal/fal.provider';
export type { FalRoute } from './fal/fal.provider';
export { ReplicateProvider, REPLICATE_DEFAULTS } from './replicate/replicate.provider';
export type { ReplicateRoute } from './replicate/replicate.provider';
export { BflProvider, BFL_DEFAULTS } from './bfl/bfl.provider';
export type { BflRoute } from './bfl/bfl.provider';
export { FakeQueueUpstream } from './fake-queue-upstream';
export type { FakeQueueOptions, FakeSeen, QueueDialect } from './fake-queue-upstream';
export { BATCH_DEFAULTS, batchSetting, routeBatchSettings } from './upstream-batch';
export { createBatchApi, hasBatchApi } from './provider.factory';
export { SimulatedBatchApi, SIMULATED_BATCH_MARKERS, SIMULATED_BATCH_HANG_STEPS } from './simulated/simulated.batch';
export type { SimulatedBatchHangStep } from './simulated/simulated.batch';
export type { BatchObjectStore, UpstreamBatchApi, UpstreamBatchLine, UpstreamBatchRef, UpstreamBatchStatus, UpstreamBatchResult, RouteBatchSettings, BatchCapableType } from './upstream-batch';
export { OpenAiBatchApi, OPENAI_BATCH_GROUP_KEY, OPENAI_BATCH_MAX_BYTES, OPENAI_BATCH_MAX_LINES } from './openai/openai.batch';
export type { OpenAiBatchConfig } from './openai/openai.batch';
export { GeminiBatchApi, GEMINI_BATCH_MAX_BYTES, GEMINI_BATCH_MAX_LINES } from './gemini/gemini.batch';
export type { GeminiBatchConfig } from './gemini/gemini.batch';
export { OpenAiBatchFakeUpstream, OPENAI_BATCH_FAKE_MARKERS } from './openai/openai-batch.fake';
export { GeminiBatchFakeUpstream, GEMINI_BATCH_FAKE_MARKERS } from './gemini/gemini-batch.fake';
