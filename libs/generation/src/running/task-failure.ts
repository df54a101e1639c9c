import type { TaskErrorCode } from '@app/database';
import { isProviderError, ProviderErrorKind } from '@app/providers';

/** The longest `error` a task carries: one honest line, never a stack trace. */
export const MAX_TASK_ERROR_LENGTH = 300;

/**
 * A failure that retrying cannot fix (a reference image that is gone, a route that makes no
 * sense): the task fails at once and is refunded. The message is shown to the account holder.
 */
export class TaskFailure extends Error {
  constructor(
    message: string,
    readonly code: TaskErrorCode = 'internal',
  ) {
    super(message);
    this.name = 'TaskFailure';
  }
}

/** Thrown into in-flight renders when a shutdown's grace period runs out. */
export class ShutdownInterruption extends Error {
  constructor() {
    super('The generator is shutting down');
    this.name = 'ShutdownInterruption';
  }
}

export interface ClassifiedFailure {
  retryable: boolean;
  /** Safe to store in tasks.error. */
  message: string;
  retryAfterMs?: number;
  /** Kiln's fault rather than the upstream's or the request's: worth a log line with details. */
  internal: boolean;
  /** The task's errorCode should this failure be its last. */
  code: TaskErrorCode;
}

/**
 * What each provider failure means to a client: the upstream refused this very request, or
 * could not serve it (busy, down, slow, or answering nonsense), or the route itself is
 * unusable until an operator fixes it.
 */
const CODE_BY_PROVIDER_ERROR: Record<ProviderErrorKind, TaskErrorCode> = {
  bad_request: 'upstream_rejected',
  content_refused: 'content_refused',
  rate_limited: 'upstream_unavailable',
  upstream_error: 'upstream_unavailable',
  timeout: 'upstream_unavailable',
  invalid_response: 'upstream_unavailable',
  not_configured: 'provider_not_configured',
};

/**
 * Upstream errors say themselves whether they are retryable (429, 5xx, timeouts are);
 * anything unexpected (database, storage, a bug) is treated as transient infrastructure
 * trouble and retried, and if it persists the task fails with a generic message, because
 * an internal error text may hold paths, hosts or SQL.
 */
export function classifyFailure(err: unknown): ClassifiedFailure {
  if (isProviderError(err)) {
    return {
      retryable: err.retryable,
      message: oneLine(err.message),
      retryAfterMs: err.retryAfterMs,
      internal: false,
      code: CODE_BY_PROVIDER_ERROR[err.kind],
    };
  }
  if (err instanceof TaskFailure) return { retryable: false, message: oneLine(err.message), internal: false, code: err.code };
  return { retryable: true, message: 'Kiln could not complete this image (internal error)', internal: true, code: 'internal' };
}

/**
 * Whether a failure is the route's own (its upstream down, slow, busy, misconfigured) and so
 * counts in its health: a content refusal or a request the upstream refused as invalid (a 4xx
 * other than 429) says something about that one request, not the route.
 */
export function countsAgainstRoute(err: unknown): boolean {
  const { code } = classifyFailure(err);
  return code !== 'content_refused' && code !== 'upstream_rejected';
}

export function exhaustedMessage(message: string, attempts: number): string {
  return oneLine(`${message} (gave up after ${attempts} attempt${attempts === 1 ? '' : 's'})`);
}

export function oneLine(message: string): string {
  const flat = String(message).replace(/\s+/g, ' ').trim() || 'Unknown error';
  return flat.length > MAX_TASK_ERROR_LENGTH ? `${flat.slice(0, MAX_TASK_ERROR_LENGTH - 1)}…` : flat;
}

/** For logs: the message of anything thrown. */
export function describeError(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}
