import type { UpstreamAnswer } from '../provider-type';
import { ProviderError } from '../render.types';
import { parseRetryAfter, safeUpstreamMessage } from '../upstream-http';

/** Candidate finish reasons that mean the content policy refused the prompt or the image (spec v1.2). */
export const GEMINI_REFUSAL_FINISH_REASONS = ['SAFETY', 'PROHIBITED_CONTENT', 'BLOCKLIST', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT'];

/**
 * The gemini type's error classification for answers that are not a success. Google's error
 * body is `{ error: { code, message, status, details } }`; a 429 may say when to come back in
 * a RetryInfo detail (`retryDelay: "30s"`) rather than in Retry-After.
 */
export function classifyGeminiError(answer: UpstreamAnswer, secrets: { apiKey: string }): ProviderError {
  const { status } = answer;
  const { message, code, retryDelayMs } = googleError(answer.text, secrets.apiKey);
  const detail = message ? `: ${message}` : '';
  if (status === 429) {
    return new ProviderError('rate_limited', `Upstream rate limit reached (429)${detail}`, {
      retryAfterMs: parseRetryAfter(answer.headers) ?? retryDelayMs,
      status,
      upstreamCode: code,
    });
  }
  if (status === 408 || status === 504)
    return new ProviderError('timeout', `Upstream timed out (${status})${detail}`, { status, upstreamCode: code });
  if (status >= 500)
    return new ProviderError('upstream_error', `Upstream error (${status})${detail}`, { retryable: true, status, upstreamCode: code });
  return new ProviderError('bad_request', `Upstream refused the request (${status})${detail}`, { status, upstreamCode: code });
}

/**
 * A 200 answer without an image: a refusal (promptFeedback.blockReason, or a refusal finish
 * reason) is content_refused; anything else (text only, NO_IMAGE, IMAGE_OTHER) is an answer
 * that is not an image.
 */
export function geminiNoImage(answer: {
  promptFeedback?: { blockReason?: unknown };
  candidates?: { finishReason?: unknown }[];
}): ProviderError {
  const blockReason = answer.promptFeedback?.blockReason;
  if (typeof blockReason === 'string' && blockReason !== 'BLOCK_REASON_UNSPECIFIED') {
    return new ProviderError('content_refused', `The upstream refused the prompt (blockReason ${blockReason})`, {
      upstreamCode: blockReason,
    });
  }
  const finishReason = answer.candidates?.[0]?.finishReason;
  if (typeof finishReason === 'string' && GEMINI_REFUSAL_FINISH_REASONS.includes(finishReason)) {
    return new ProviderError('content_refused', `The upstream refused to make the image (finishReason ${finishReason})`, {
      upstreamCode: finishReason,
    });
  }
  const why = typeof finishReason === 'string' ? ` (finishReason ${finishReason})` : '';
  return new ProviderError('invalid_response', `The image provider answered without an image${why}`, {
    ...(typeof finishReason === 'string' ? { upstreamCode: finishReason } : {}),
  });
}

function googleError(text: string, apiKey: string): { message: string; code?: string; retryDelayMs?: number } {
  let message = text;
  let code: string | undefined;
  let retryDelayMs: number | undefined;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; status?: unknown; details?: unknown } };
    const error = parsed?.error;
    if (error && typeof error === 'object') {
      if (typeof error.message === 'string') message = error.message;
      if (typeof error.status === 'string') code = error.status;
      if (Array.isArray(error.details)) {
        for (const d of error.details as { retryDelay?: unknown }[]) {
          const m = typeof d?.retryDelay === 'string' ? /^(\d+(?:\.\d+)?)s$/.exec(d.retryDelay) : null;
          if (m) retryDelayMs = Math.round(Number(m[1]) * 1000);
        }
      }
    }
  } catch {
    // not JSON: quote the text itself
  }
  return { message: safeUpstreamMessage(message, apiKey), code, retryDelayMs };
}
