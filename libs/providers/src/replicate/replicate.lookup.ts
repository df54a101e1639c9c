import type { SubmitLookup, UpstreamSubmission } from '../provider-type';
import { ProviderError } from '../render.types';
import { objectOf, UpstreamHttp } from '../queue-http';

/** What finds a prediction again: the model and the input fields Kiln sends every prediction its own values of. */
export interface ReplicateSubmitKey {
  model: string;
  prompt: string;
  seed: number;
}

/** Clocks differ: predictions created this long before the intent are still looked at. */
const CLOCK_SKEW_MS = 5 * 60_000;
/** Pages of 100 looked at before the lookup gives up (unknown: the route's onUnknownSubmit decides). */
const MAX_PAGES = 10;

/**
 * Replicate lists the key's predictions newest first (`GET {baseUrl}/predictions`, 100 a
 * page, `next` the following page, each with its `model`, `input`, `created_at` and `urls`;
 * replicate 1.4's `predictions.list`): the one with the key's model, prompt and seed created
 * since the intent is the request a crash left without its answer. Reaching predictions older
 * than the intent without a match means it was never taken.
 */
export async function findPrediction(
  http: UpstreamHttp,
  auth: Record<string, string>,
  key: ReplicateSubmitKey,
  since: Date,
  submissionOf: (body: Record<string, unknown>) => UpstreamSubmission,
  signal?: AbortSignal,
): Promise<SubmitLookup> {
  const oldest = since.getTime() - CLOCK_SKEW_MS;
  let url = `${http.baseUrl}/predictions`;
  for (let page = 0; page < MAX_PAGES; page++) {
    const answer = await http.call('GET', url, auth, undefined, { signal, poll: true });
    if (answer.status < 200 || answer.status >= 300) throw http.errorFor(answer);
    const body = objectOf(answer, 'Replicate');
    if (!Array.isArray(body.results)) throw new ProviderError('invalid_response', 'Replicate listed predictions without results');
    for (const item of body.results as Record<string, unknown>[]) {
      const created = Date.parse(String(item.created_at));
      if (Number.isFinite(created) && created < oldest) return { state: 'absent' };
      const input = (item.input ?? {}) as Record<string, unknown>;
      if (item.model === key.model && input.prompt === key.prompt && input.seed === key.seed && typeof item.id === 'string')
        return { state: 'found', submission: submissionOf(item) };
    }
    if (typeof body.next !== 'string' || !body.next) return { state: 'absent' };
    const next = http.sameOriginOr(body.next, '');
    if (!next) return { state: 'unknown', detail: 'Replicate named a next page on another origin' };
    url = next;
  }
  return { state: 'unknown', detail: `more than ${MAX_PAGES * 100} predictions since the intent` };
}
