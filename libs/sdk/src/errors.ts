/** What the service answered when it refused a request: its error object, status and request id. */
export class KilnApiError extends Error {
  override readonly name: string = 'KilnApiError';

  constructor(
    /** The error code of Kiln's error table, e.g. `insufficient_credits`; `connection_failed` when no answer came. */
    readonly code: string,
    message: string,
    /** The HTTP status; 0 when the service could not be reached. */
    readonly status: number,
    readonly details: Record<string, unknown> | undefined,
    /** X-Request-Id of the answer: the server logs under it. */
    readonly requestId: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The service could not be reached, or did not answer in time, after every retry. */
export class KilnConnectionError extends KilnApiError {
  override readonly name = 'KilnConnectionError';

  constructor(message: string, cause: unknown) {
    super('connection_failed', message, 0, undefined, undefined, { cause });
  }
}

/** A webhook delivery that does not verify: bad or missing signature, or a stale timestamp. */
export class KilnWebhookVerificationError extends Error {
  override readonly name = 'KilnWebhookVerificationError';
}
