import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { Request, Response } from 'express';
import { isDatabaseUnavailable } from '@app/database';
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
  [ErrorCode.IdempotencyKeyReused]: HttpStatus.UNPROCESSABLE_ENTITY,
  [ErrorCode.IdempotencyKeyInUse]: HttpStatus.CONFLICT,
};

/** Seconds a client is told to wait before retrying a key whose first request is still running: about one creation's time. */
export const IDEMPOTENCY_KEY_IN_USE_RETRY_AFTER_S = 1;

/** Seconds a client is told to wait after a 503: long enough for a database restart or failover to finish. */
export const SERVICE_UNAVAILABLE_RETRY_AFTER_S = 5;

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: ErrorDetails };
}

/** Turns anything thrown into the interface's error object (section 7). */
export function toErrorBody(exception: unknown): { status: number; body: ErrorBody; unexpected: boolean } {
  if (exception instanceof KilnError) {
    const body: ErrorBody = { error: { code: exception.code, message: exception.message } };
    if (exception.details) body.error.details = exception.details;
    return { status: STATUS_BY_CODE[exception.code], body, unexpected: false };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    const code =
      status === HttpStatus.NOT_FOUND
        ? ErrorCode.NotFound
        : status === HttpStatus.TOO_MANY_REQUESTS
          ? ErrorCode.RateLimited
          : status >= 500
            ? ErrorCode.InternalError
            : ErrorCode.InvalidRequest;
    const message = status >= 500 ? 'Internal server error' : httpMessage(exception);
    return { status: STATUS_BY_CODE[code], body: { error: { code, message } }, unexpected: status >= 500 };
  }
  if (isDatabaseUnavailable(exception)) {
    // An outage, not a bug: the client is told to come back (Retry-After), not to report one.
    return {
      status: HttpStatus.SERVICE_UNAVAILABLE,
      body: { error: { code: ErrorCode.ServiceUnavailable, message: 'The service is temporarily unavailable; retry shortly' } },
      unexpected: false,
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
    const { status, body, unexpected } = toErrorBody(exception);
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
    if (status === HttpStatus.SERVICE_UNAVAILABLE && !res.getHeader('Retry-After')) {
      res.setHeader('Retry-After', String(SERVICE_UNAVAILABLE_RETRY_AFTER_S));
    }
    if (exception instanceof KilnError && exception.code === ErrorCode.IdempotencyKeyInUse) {
      res.setHeader('Retry-After', String(IDEMPOTENCY_KEY_IN_USE_RETRY_AFTER_S));
    }
    // OpenAI's SDKs retry every 5xx by default (twice) and the door sends no idempotency key:
    // a retried timeout would make and charge another batch while the first goes on. Their
    // clients obey x-should-retry; a failure (everything refunded) may be asked again.
    if (exception instanceof KilnError && exception.code === ErrorCode.GenerationTimeout) res.setHeader('x-should-retry', 'false');
    // OpenAI's SDKs read error.type and error.param: the door adds them to Kiln's object.
    res.status(status).json(req?.path?.startsWith(OPENAI_IMAGES_PATH) ? withOpenAiFields(status, body) : body);
  }
}
