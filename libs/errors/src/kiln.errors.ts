/**
 * Every error code a client can see (docs/api.md#errors).
 * Libs throw KilnError with one of these; only the api's error filter knows HTTP statuses.
 */
export enum ErrorCode {
  Unauthorized = 'unauthorized',
  InvalidApiKey = 'invalid_api_key',
  KeyRevoked = 'key_revoked',
  AccountDisabled = 'account_disabled',
  ApiNotAvailableOnPlan = 'api_not_available_on_plan',
  InsufficientScope = 'insufficient_scope',
  InvalidRequest = 'invalid_request',
  UnknownModel = 'unknown_model',
  SizeNotAllowed = 'size_not_allowed',
  TooManyRefImages = 'too_many_ref_images',
  RefsNotSupported = 'refs_not_supported',
  ContentBlocked = 'content_blocked',
  PromptTooLong = 'prompt_too_long',
  /** The economy tier asked of a model (or a resolution of it) that does not offer it. */
  TierNotAvailable = 'tier_not_available',
  InsufficientCredits = 'insufficient_credits',
  DailyCreditCapExceeded = 'daily_credit_cap_exceeded',
  /** A key's budget (`budget: {credits, period}`) would be exceeded in its period. */
  KeyBudgetExceeded = 'key_budget_exceeded',
  /** The key's `models` allowlist does not name the model asked for. */
  ModelNotAllowed = 'model_not_allowed',
  BatchLimitExceeded = 'batch_limit_exceeded',
  ConcurrentLimitExceeded = 'concurrent_limit_exceeded',
  KeyLimitExceeded = 'key_limit_exceeded',
  EndpointLimitExceeded = 'endpoint_limit_exceeded',
  EmailTaken = 'email_taken',
  InvalidCredentials = 'invalid_credentials',
  RateLimited = 'rate_limited',
  NotFound = 'not_found',
  /** A batch that finished without a cancel cannot be cancelled. */
  BatchNotCancellable = 'batch_not_cancellable',
  InternalError = 'internal_error',
  /** An Idempotency-Key already used (within 24 h) for another request. */
  IdempotencyKeyReused = 'idempotency_key_reused',
  /** An Idempotency-Key whose first request is still running; retry after Retry-After. */
  IdempotencyKeyInUse = 'idempotency_key_in_use',
  /** A dependency (PostgreSQL, Redis) is unreachable; retry after Retry-After. */
  ServiceUnavailable = 'service_unavailable',
  /** The OpenAI-compatible door: no image of its batch succeeded (every one refunded). */
  GenerationFailed = 'generation_failed',
  /** The OpenAI-compatible door: its batch was not done within OPENAI_COMPAT_WAIT_MS (it goes on). */
  GenerationTimeout = 'generation_timeout',
  /** The OpenAI-compatible door: Kiln's content policy or the upstream's refused the prompt (OpenAI's code for it). */
  ModerationBlocked = 'moderation_blocked',
}

export type ErrorDetails = Record<string, unknown>;

export class KilnError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetails,
  ) {
    super(message);
    this.name = 'KilnError';
  }
}

/** Shorthand for the most common refusal: `invalid_request` naming the field and why. */
export function invalidRequest(field: string, reason: string, message?: string): KilnError {
  return new KilnError(ErrorCode.InvalidRequest, message ?? `Invalid ${field}: ${reason}`, { field, reason });
}

export function notFound(what = 'Resource'): KilnError {
  return new KilnError(ErrorCode.NotFound, `${what} not found`);
}
