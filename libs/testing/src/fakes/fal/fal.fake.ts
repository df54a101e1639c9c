import { FakeQueueOptions, FakeQueueUpstream, QueueDialect } from '../fake-queue-upstream';

/**
 * fal's queue API: POST /{app}, GET /{app}/requests/{id}/status, then GET /{app}/requests/{id}
 * for the result; PUT /{app}/requests/{id}/cancel answers 202 CANCELLATION_REQUESTED for a
 * request still IN_QUEUE (taken out: never run), 400 ALREADY_COMPLETED once it runs or ran.
 */
export const falDialect: QueueDialect = {
  baseUrl: (root) => root,
  isSubmit: (path) => !path.includes('/requests/'),
  requestIdOf: (url) => /\/requests\/([^/]+)(\/status)?$/.exec(url.pathname)?.[1] ?? null,
  cancelIdOf: (method, url) => (method === 'PUT' ? (/\/requests\/([^/]+)\/cancel$/.exec(url.pathname)?.[1] ?? null) : null),
  cancelAnswer: (_request, stage) =>
    stage === 'queued'
      ? { status: 202, body: { status: 'CANCELLATION_REQUESTED' } }
      : { status: 400, body: { status: 'ALREADY_COMPLETED' } },
  // Result reads (GET .../requests/{id}) are not polls.
  isStatusCheck: (url) => url.pathname.endsWith('/status'),
  inputOf: (body) => body ?? {},
  accepted: (id, root, submitPath) => {
    const app = `${root}/${submitPath.split('/').filter(Boolean).slice(0, 2).join('/')}/requests/${id}`;
    return {
      status: 200,
      body: { request_id: id, status_url: `${app}/status`, response_url: app, cancel_url: `${app}/cancel`, queue_position: 0 },
    };
  },
  refusedAtSubmit: () => ({
    status: 422,
    body: { detail: [{ loc: ['body', 'prompt'], msg: 'The content could not be processed', type: 'content_policy_violation' }] },
  }),
  answer: (request, url, { ready, stage, imageUrl, size }) => {
    // fal documents no status for a request taken out of its queue: here it reads as completed
    // with an error for its result, so a poll ends it as a failure.
    if (stage === 'cancelled') {
      if (url.pathname.endsWith('/status')) return { status: 200, body: { status: 'COMPLETED' } };
      return { status: 400, body: { detail: 'Request was cancelled' } };
    }
    if (url.pathname.endsWith('/status'))
      return { status: ready ? 200 : 202, body: { status: ready ? 'COMPLETED' : stage === 'running' ? 'IN_PROGRESS' : 'IN_QUEUE' } };
    if (!ready) return { status: 400, body: { detail: 'Request is still in progress' } };
    if (request.outcome === 'refused') {
      return {
        status: 422,
        body: { detail: [{ loc: ['body', 'prompt'], msg: 'Content policy violation', type: 'content_policy_violation' }] },
      };
    }
    if (request.outcome === 'failed') return { status: 500, body: { detail: 'Internal server error' } };
    if (request.outcome === 'no-image') return { status: 200, body: { images: [] } };
    return {
      status: 200,
      body: {
        images: [{ url: imageUrl, width: size.width, height: size.height, content_type: 'image/png' }],
        seed: request.input.seed,
        has_nsfw_concepts: [request.outcome === 'nsfw'],
      },
    };
  },
};

/** A local fal stand-in on 127.0.0.1 for tests and the bench (behaviours: see FakeQueueUpstream). */
export function fakeFal(options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream(falDialect, options);
}
