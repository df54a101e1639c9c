import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { isDatabaseUnavailable, isTransientConflict } from '@app/database';
import { ErrorCode, ErrorDetails, KilnError } from '@app/errors';

/** The one map from error code to HTTP status: a new code does not compile until it has one. */
export const STATUS_BY_CODE: Record<ErrorCode, HttpStatus> = {
  [ErrorCode.Unauthorized]: HttpStatus.UNAUTHORIZED,
  [ErrorCode.InvalidApiKey]: HttpStatus.UNAUTHORIZED,
  [ErrorCode.KeyRevoked]: HttpStatus.UNAUTHORIZED,
  [ErrorCode.InvalidCredentials]: HttpStatus.UNAUTHORIZED,
  [ErrorCode.AccountDisabled]: HttpStatus.FORBIDDEN,
  [ErrorCode.ApiNotAvailableOnPlan]: HttpStatus.FORBIDDEN,
  [ErrorCode.InsufficientScope]: HttpStatus.FORBIDDEN,
  [ErrorCode.InvalidRequest]: HttpStatus.BAD_REQUEST,
  [ErrorCode.UnknownModel]: HttpStatus.BAD_REQUEST,
  [ErrorCode.SizeNotAllowed]: HttpStatus.BAD_REQUEST,
  [ErrorCode.TooManyRefImages]: HttpStatus.BAD_REQUEST,
  [ErrorCode.RefsNotSupported]: HttpStatus.BAD_REQUEST,
  [ErrorCode.ContentBlocked]: HttpStatus.BAD_REQUEST,
  [ErrorCode.PromptTooLong]: HttpStatus.BAD_REQUEST,
  [ErrorCode.TierNotAvailable]: HttpStatus.BAD_REQUEST,
  [ErrorCode.InsufficientCredits]: HttpStatus.PAYMENT_REQUIRED,
  [ErrorCode.DailyCreditCapExceeded]: HttpStatus.PAYMENT_REQUIRED,
  [ErrorCode.KeyBudgetExceeded]: HttpStatus.FORBIDDEN,
  [ErrorCode.ModelNotAllowed]: HttpStatus.FORBIDDEN,
  [ErrorCode.BatchLimitExceeded]: HttpStatus.FORBIDDEN,
  [ErrorCode.ConcurrentLimitExceeded]: HttpStatus.FORBIDDEN,
  [ErrorCode.KeyLimitExceeded]: HttpStatus.FORBIDDEN,
  [ErrorCode.EndpointLimitExceeded]: HttpStatus.FORBIDDEN,
  [ErrorCode.EmailTaken]: HttpStatus.CONFLICT,
  [ErrorCode.RateLimited]: HttpStatus.TOO_MANY_REQUESTS,
  [ErrorCode.NotFound]: HttpStatus.NOT_FOUND,
  [ErrorCode.BatchNotCancellable]: HttpStatus.CONFLICT,
  [ErrorCode.InternalError]: HttpStatus.INTERNAL_SERVER_ERROR,
  [ErrorCode.ServiceUnavailable]: HttpStatus.SERVICE_UNAVAILABLE,
  [ErrorCode.GenerationFailed]: HttpStatus.BAD_GATEWAY,
  [ErrorCode.GenerationTimeout]: HttpStatus.GATEWAY_TIMEOUT,
  [ErrorCode.ModerationBlocked]: HttpStatus.BAD_REQUEST,
  [ErrorCode.IdempotencyKeyReused]: HttpStatus.UNPROCESSABLE_ENTITY,
  [ErrorCode.IdempotencyKeyInUse]: HttpStatus.CONFLICT,
};

/**
 * Whether the same request, asked again, may get another answer (docs/api.md#errors, the
 * Retryable column). The OpenAI-compatible door tells OpenAI's SDKs so: they retry 408, 409,
 * 429 and every 5xx unless x-should-retry says false, and each retry there is a new batch.
 */
export const RETRY_MAY_PASS: Record<ErrorCode, boolean> = {
  [ErrorCode.Unauthorized]: false,
  [ErrorCode.InvalidApiKey]: false,
  [ErrorCode.KeyRevoked]: false,
  [ErrorCode.InvalidCredentials]: false,
  [ErrorCode.AccountDisabled]: false,
  [ErrorCode.ApiNotAvailableOnPlan]: false,
  [ErrorCode.InsufficientScope]: false,
  [ErrorCode.InvalidRequest]: false,
  [ErrorCode.UnknownModel]: false,
  [ErrorCode.SizeNotAllowed]: false,
  [ErrorCode.TooManyRefImages]: false,
  [ErrorCode.RefsNotSupported]: false,
  [ErrorCode.ContentBlocked]: false,
  [ErrorCode.ModerationBlocked]: false,
  [ErrorCode.PromptTooLong]: false,
  [ErrorCode.TierNotAvailable]: false,
  [ErrorCode.InsufficientCredits]: false,
  [ErrorCode.DailyCreditCapExceeded]: false,
  [ErrorCode.KeyBudgetExceeded]: false,
  [ErrorCode.ModelNotAllowed]: false,
  [ErrorCode.BatchLimitExceeded]: false,
  // Frees up as the account's other batches end (the SDKs do not retry a 403 anyway).
  [ErrorCode.ConcurrentLimitExceeded]: true,
  [ErrorCode.KeyLimitExceeded]: false,
  [ErrorCode.EndpointLimitExceeded]: false,
  [ErrorCode.EmailTaken]: false,
  [ErrorCode.RateLimited]: true,
  [ErrorCode.NotFound]: false,
  [ErrorCode.BatchNotCancellable]: false,
  [ErrorCode.InternalError]: true,
  [ErrorCode.ServiceUnavailable]: true,
  // Every image refunded; may pass when the upstream's trouble passes (details.retryable).
  [ErrorCode.GenerationFailed]: true,
  // The batch goes on, charged: a retry would make and charge a second one.
  [ErrorCode.GenerationTimeout]: false,
  [ErrorCode.IdempotencyKeyReused]: false,
  [ErrorCode.IdempotencyKeyInUse]: true,
};

/** An error answer a retry cannot change: by its code, or its details saying so (generation_failed on a rejected route). */
export function retryCannotChange(body: ErrorBody): boolean {
  return !RETRY_MAY_PASS[body.error.code] || body.error.details?.retryable === false;
}

/** Seconds a client is told to wait before retrying a key whose first request is still running: about one creation's time. */
export const IDEMPOTENCY_KEY_IN_USE_RETRY_AFTER_S = 1;

/** Seconds a client is told to wait after a 503: long enough for a database restart or failover to finish. */
export const SERVICE_UNAVAILABLE_RETRY_AFTER_S = 5;

/** Seconds after a 503 for a transaction that lost to a concurrent one (a deadlock): the other is done by then. */
export const CONFLICT_RETRY_AFTER_S = 1;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetails };
}

/** Turns anything thrown into the interface's error object (section 7). */
export function toErrorBody(exception: unknown): { status: HttpStatus; body: ErrorBody; unexpected: boolean; retryAfterSeconds?: number } {
  if (exception instanceof KilnError) {
    const body: ErrorBody = { error: { code: exception.code, message: exception.message } };
    if (exception.details) body.error.details = exception.details;
    return { status: STATUS_BY_CODE[exception.code], body, unexpected: false };
  }
  if (exception instanceof HttpException) {
    const status: HttpStatus = exception.getStatus();
    const serverError = status >= HttpStatus.INTERNAL_SERVER_ERROR;
    const code =
      status === HttpStatus.NOT_FOUND
        ? ErrorCode.NotFound
        : status === HttpStatus.TOO_MANY_REQUESTS
          ? ErrorCode.RateLimited
          : serverError
            ? ErrorCode.InternalError
            : ErrorCode.InvalidRequest;
    const message = serverError ? 'Internal server error' : httpMessage(exception);
    return { status: STATUS_BY_CODE[code], body: { error: { code, message } }, unexpected: serverError };
  }
  if (isDatabaseUnavailable(exception)) {
    // An outage, not a bug: the client is told to come back (Retry-After), not to report one.
    return {
      status: HttpStatus.SERVICE_UNAVAILABLE,
      body: { error: { code: ErrorCode.ServiceUnavailable, message: 'The service is temporarily unavailable; retry shortly' } },
      unexpected: false,
    };
  }
  if (isTransientConflict(exception)) {
    // The transaction lost to a concurrent one and rolled back whole: asking again is sound.
    return {
      status: HttpStatus.SERVICE_UNAVAILABLE,
      body: { error: { code: ErrorCode.ServiceUnavailable, message: 'A concurrent change got in the way; retry shortly' } },
      unexpected: false,
      retryAfterSeconds: CONFLICT_RETRY_AFTER_S,
    };
  }
  return {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    body: { error: { code: ErrorCode.InternalError, message: 'Internal server error; safe to retry' } },
    unexpected: true,
  };
}

/** Where the OpenAI-compatible door lives (apps/api/src/openai). */
export const OPENAI_IMAGES_PATH = '/v1/images/';

/** OpenAI's error `type` for a status, and `param` from the field Kiln's details name. */
export function withOpenAiFields(status: number, body: ErrorBody): ErrorBody & { error: { type: string; param: string | null } } {
  const type =
    status === 401
      ? 'authentication_error'
      : status === 403
        ? 'permission_error'
        : status === 402
          ? 'insufficient_quota'
          : status === 429
            ? 'rate_limit_error'
            : body.error.code === ErrorCode.ModerationBlocked
              ? 'image_generation_user_error'
              : status >= 500
                ? 'server_error'
                : 'invalid_request_error';
  const field = body.error.details?.field ?? (body.error.code === ErrorCode.UnknownModel ? 'model' : null);
  return { error: { ...body.error, type, param: typeof field === 'string' ? field : null } };
}

function httpMessage(e: HttpException): string {
  const r = e.getResponse();
  if (typeof r === 'string') return r;
  const m = (r as { message?: unknown }).message;
  return Array.isArray(m) ? String(m[0]) : typeof m === 'string' ? m : e.message;
}

@Catch()
export class ErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('Errors');

  catch(exception: unknown, host: ArgumentsHost): void {
    const ctx = host.switchToHttp();
    const req = ctx.getRequest<Request & { id?: string }>();
    const res = ctx.getResponse<Response>();
    const { status, body, unexpected, retryAfterSeconds } = toErrorBody(exception);
    const requestId = req?.id ? String(req.id) : undefined;
    if (unexpected) {
      // The cause stays in the log, keyed by the request id; the client only sees the id.
      this.logger.error({ err: exception, requestId }, `Unexpected error on ${req?.method} ${req?.url}`);
      if (requestId) body.error.details = { ...(body.error.details ?? {}), requestId };
    }
    if (status === HttpStatus.SERVICE_UNAVAILABLE) {
      this.logger.warn({ err: exception, requestId }, `Service unavailable on ${req?.method} ${req?.url}`);
    }
    if (res.headersSent) return;
    // A refusal that knows when to come back says so (the archive caps); others get the defaults.
    const retryAfter = exception instanceof KilnError ? exception.details?.retryAfter : undefined;
    if (typeof retryAfter === 'number' && !res.getHeader('Retry-After')) res.setHeader('Retry-After', String(retryAfter));
    if (retryAfterSeconds !== undefined && !res.getHeader('Retry-After')) res.setHeader('Retry-After', String(retryAfterSeconds));
    if (status === HttpStatus.SERVICE_UNAVAILABLE && !res.getHeader('Retry-After')) {
      res.setHeader('Retry-After', String(SERVICE_UNAVAILABLE_RETRY_AFTER_S));
    }
    if (exception instanceof KilnError && exception.code === ErrorCode.IdempotencyKeyInUse) {
      res.setHeader('Retry-After', String(IDEMPOTENCY_KEY_IN_USE_RETRY_AFTER_S));
    }
    const openAiDoor = req?.path?.startsWith(OPENAI_IMAGES_PATH) ?? false;
    // OpenAI's SDKs retry 408, 409, 429 and every 5xx by default (twice) and the door sends no
    // idempotency key: each retry would be a new batch, charged, and another upstream call.
    // Their clients obey x-should-retry: every answer a retry cannot change says so.
    if (openAiDoor && retryCannotChange(body)) res.setHeader('x-should-retry', 'false');
    // OpenAI's SDKs read error.type and error.param: the door adds them to Kiln's object.
    res.status(status).json(openAiDoor ? withOpenAiFields(status, body) : body);
  }
}
