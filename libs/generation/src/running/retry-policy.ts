/** Longest wait between two attempts of one task, whatever the attempt number. */
export const MAX_BACKOFF_MS = 60_000;
/** An upstream asking for longer than this is believed only this far; maxAttempts bounds the rest. */
export const MAX_RETRY_AFTER_MS = 5 * 60_000;

export interface BackoffOptions {
  /** Delay before the second attempt; doubles with each further one. */
  baseMs: number;
  maxMs?: number;
  random?: () => number;
}

/**
 * How long to wait after attempt `failedAttempt` (1-based) failed: exponential with "equal
 * jitter" (half fixed, half random) so that tasks failing together do not retry together,
 * and never sooner than the upstream's Retry-After.
 */
export function retryDelayMs(failedAttempt: number, opts: BackoffOptions, retryAfterMs?: number): number {
  const cap = opts.maxMs ?? MAX_BACKOFF_MS;
  const random = opts.random ?? Math.random;
  const exponent = Math.max(0, Math.min(30, failedAttempt - 1));
  const ceiling = Math.min(cap, Math.max(1, opts.baseMs) * 2 ** exponent);
  const jittered = ceiling / 2 + random() * (ceiling / 2);
  const upstream = retryAfterMs !== undefined && retryAfterMs > 0 ? Math.min(retryAfterMs, MAX_RETRY_AFTER_MS) : 0;
  return Math.round(Math.max(jittered, upstream));
}
