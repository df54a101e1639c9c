/**
 * The reason `signal` was aborted with, as the Error it is: an AbortController aborted
 * without one gives a DOMException (an Error), and Kiln aborts with Errors only. The DOM
 * types say `any`, as a caller elsewhere may abort with anything.
 */
export function abortReason(signal: AbortSignal): Error {
  return signal.reason as Error;
}
