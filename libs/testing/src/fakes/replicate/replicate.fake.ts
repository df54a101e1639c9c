import { FakeQueueOptions, FakeQueueUpstream, QueueDialect } from '../fake-queue-upstream';

/**
 * Replicate's predictions API: POST /v1/models/{owner}/{name}/predictions, then GET
 * /v1/predictions/{id}; POST /v1/predictions/{id}/cancel answers the prediction: `canceled`
 * without output when it had not finished, as it was (`succeeded`, with its output) when it had.
 */
export const replicateDialect: QueueDialect = {
  baseUrl: (root) => `${root}/v1`,
  isSubmit: (path) => /^\/v1\/models\/[^/]+\/[^/]+\/predictions$/.test(path),
  requestIdOf: (url) => /^\/v1\/predictions\/([^/]+)$/.exec(url.pathname)?.[1] ?? null,
  isStatusCheck: () => true,
  cancelIdOf: (method, url) => (method === 'POST' ? (/^\/v1\/predictions\/([^/]+)\/cancel$/.exec(url.pathname)?.[1] ?? null) : null),
  cancelAnswer: (request, stage, imageUrl) => {
    const prediction = { id: request.id, input: request.input, error: null, logs: '' };
    if (stage === 'done') return { status: 200, body: { ...prediction, status: 'succeeded', output: [imageUrl] } };
    // A prediction that had started is stopped too (and its run time billed): no output either way.
    const startedAt = stage === 'running' ? new Date(request.submittedAt).toISOString() : null;
    return { status: 200, body: { ...prediction, status: 'canceled', output: null, started_at: startedAt } };
  },
  // GET /v1/predictions: the key's predictions newest first, 100 a page, `next` the following
  // page's URL (Replicate's HTTP docs, "List predictions"; replicate 1.4 predictions.list).
  list: (url, newestFirst, root, stageOf) => {
    if (url.pathname !== '/v1/predictions') return null;
    const page = Number(url.searchParams.get('cursor') ?? '0');
    const results = newestFirst.slice(page * 100, page * 100 + 100).map((r) => {
      const stage = stageOf(r);
      return {
        id: r.id,
        model: /^\/v1\/models\/([^/]+\/[^/]+)\/predictions$/.exec(r.submitPath)?.[1] ?? null,
        version: 'hidden',
        input: r.input,
        source: 'api',
        status: stage === 'done' ? 'succeeded' : stage === 'cancelled' ? 'canceled' : stage === 'running' ? 'processing' : 'starting',
        created_at: new Date(r.submittedAt).toISOString(),
        urls: { get: `${root}/v1/predictions/${r.id}`, cancel: `${root}/v1/predictions/${r.id}/cancel` },
      };
    });
    const next = newestFirst.length > (page + 1) * 100 ? `${root}/v1/predictions?cursor=${page + 1}` : null;
    return { status: 200, body: { previous: page > 0 ? `${root}/v1/predictions?cursor=${page - 1}` : null, next, results } };
  },
  inputOf: (body) => (body?.input ?? {}) as Record<string, unknown>,
  accepted: (id, root, _submitPath, input) => ({
    status: 201,
    body: { id, status: 'starting', input, urls: { get: `${root}/v1/predictions/${id}`, cancel: `${root}/v1/predictions/${id}/cancel` } },
  }),
  refusedAtSubmit: () => ({ status: 422, body: { title: 'Input rejected', detail: 'The input was flagged as sensitive (NSFW)' } }),
  answer: (request, _url, { ready, stage, imageUrl }) => {
    const id = request.id;
    if (stage === 'cancelled') return { status: 200, body: { id, status: 'canceled', output: null, error: null } };
    if (!ready) return { status: 200, body: { id, status: stage === 'running' ? 'processing' : 'starting', output: null, error: null } };
    if (request.outcome === 'refused')
      return {
        status: 200,
        body: { id, status: 'failed', output: null, error: 'NSFW content detected. Try running it again, or try a different prompt.' },
      };
    if (request.outcome === 'failed') return { status: 200, body: { id, status: 'failed', output: null, error: 'CUDA out of memory' } };
    if (request.outcome === 'no-image') return { status: 200, body: { id, status: 'succeeded', output: [] } };
    // metrics.predict_time: the run time Replicate bills a per-second model by.
    return { status: 200, body: { id, status: 'succeeded', output: [imageUrl], error: null, metrics: { predict_time: 1.25 } } };
  },
};

/** A local Replicate stand-in on 127.0.0.1 for tests and the bench (behaviours: see FakeQueueUpstream). */
export function fakeReplicate(options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream(replicateDialect, options);
}
