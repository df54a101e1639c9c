import type { UpstreamAnswer } from '../provider-type';
import { ProviderError } from '../render.types';
import { parseRateHeaders, parseRetryAfter, safeUpstreamMessage } from '../upstream-http';

/**
 * The openai type's error classification: an OpenAI-style answer that is not a success ->
 * the ProviderError the generator acts on.
 */
export function classifyOpenAiError(answer: UpstreamAnswer, secrets: { apiKey: string }): ProviderError {
  const { status, headers } = answer;
  const { message, code } = upstreamError(answer.text, secrets.apiKey);
  const detail = message ? `: ${message}` : '';
  if (status === 429) {
    // OpenAI also answers 429 when the account is out of credit; waiting does not fix that.
    if (code === 'insufficient_quota') {
      return new ProviderError('upstream_error', `Upstream account quota exhausted (429)${detail}`, {
        retryable: false,
        status,
        upstreamCode: code,
      });
    }
    return new ProviderError('rate_limited', `Upstream rate limit reached (429)${detail}`, {
      retryAfterMs: parseRetryAfter(headers),
      status,
      upstreamCode: code,
      rateHeaders: parseRateHeaders(headers),
    });
  }
  if (status === 408) return new ProviderError('timeout', `Upstream timed out (408)${detail}`, { status, upstreamCode: code });
  if (status >= 500) {
    return new ProviderError('upstream_error', `Upstream error (${status})${detail}`, { retryable: true, status, upstreamCode: code });
  }
  const kind = code !== undefined && CONTENT_REFUSAL_CODES.includes(code) ? 'content_refused' : 'bad_request';
  return new ProviderError(kind, `Upstream refused the request (${status})${detail}`, { status, upstreamCode: code });
}

/** OpenAI's content refusals: gpt-image's moderation, and the legacy DALL-E policy code. */
const CONTENT_REFUSAL_CODES = ['moderation_blocked', 'content_policy_violation'];

/** error.message from an OpenAI-style body, else the raw text; one line, short, key scrubbed. */
function upstreamError(text: string, apiKey: string): { message: string; code?: string } {
  let message = text;
  let code: string | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; type?: unknown } | string };
    if (typeof parsed?.error === 'string') message = parsed.error;
    else if (parsed?.error && typeof parsed.error === 'object') {
      if (typeof parsed.error.message === 'string') message = parsed.error.message;
      if (typeof parsed.error.code === 'string') code = parsed.error.code;
      else if (typeof parsed.error.type === 'string') code = parsed.error.type;
    }
  } catch {
    // not JSON: quote the text itself
  }
  return { message: safeUpstreamMessage(message, apiKey), code };
}
