import { FakeQueueOptions, FakeQueueUpstream, QueueDialect } from '../fake-queue-upstream';

/** BFL's API: POST /v1/{model}, then GET /v1/get_result?id={id} (its polling_url). */
export const bflDialect: QueueDialect = {
  baseUrl: (root) => `${root}/v1`,
  isSubmit: (path) => path.startsWith('/v1/') && path !== '/v1/get_result',
  requestIdOf: (url) => (url.pathname === '/v1/get_result' ? url.searchParams.get('id') : null),
  isStatusCheck: () => true,
  inputOf: (body) => body ?? {},
  accepted: (id, root) => ({ status: 200, body: { id, polling_url: `${root}/v1/get_result?id=${id}` } }),
  refusedAtSubmit: () => ({ status: 400, body: { detail: 'Request Moderated' } }),
  answer: (request, _url, { ready, imageUrl }) => {
    const id = request.id;
    if (!ready) return { status: 200, body: { id, status: 'Pending', result: null } };
    if (request.outcome === 'refused') return { status: 200, body: { id, status: 'Content Moderated', result: null } };
    if (request.outcome === 'failed') return { status: 200, body: { id, status: 'Error', result: null } };
    if (request.outcome === 'no-image') return { status: 200, body: { id, status: 'Ready', result: {} } };
    return { status: 200, body: { id, status: 'Ready', result: { sample: imageUrl, prompt: request.prompt, seed: request.input.seed } } };
  },
};

/** A local BFL stand-in on 127.0.0.1 for tests and the bench (behaviours: see FakeQueueUpstream). */
export function fakeBfl(options: FakeQueueOptions = {}): FakeQueueUpstream {
  return new FakeQueueUpstream(bflDialect, options);
}
