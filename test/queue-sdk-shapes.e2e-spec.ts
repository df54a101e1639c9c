import { createFalClient } from '@fal-ai/client';
import * as http from 'node:http';
import Replicate from 'replicate';
import { FalProvider, RenderRequest, ReplicateProvider } from '@app/providers';
import { LocalServer } from './helpers/local-server';

/**
 * Kiln's requests to fal and Replicate against what their official npm SDKs send for the same
 * inputs (spec extensions v1.2: "confirm each request shape against the upstream's official
 * SDK"): both are pointed at one capture server on 127.0.0.1, which answers as the upstream
 * would, and the method, path, auth header and JSON body of each call are compared. The SDKs
 * are devDependencies only; Kiln calls upstreams through libs/egress.
 */

interface Captured {
  method: string;
  path: string;
  authorization: string | undefined;
  body: unknown;
}

class CaptureServer extends LocalServer {
  readonly seen: Captured[] = [];
  protected handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const path = req.url ?? '';
      this.seen.push({ method: req.method ?? '', path, authorization: req.headers.authorization, body: text ? JSON.parse(text) : null });
      res
        .writeHead(req.method === 'POST' && path.includes('/predictions') ? 201 : 200, { 'content-type': 'application/json' })
        .end(JSON.stringify(this.answer(req.method ?? '', path)));
    });
  }

  private answer(method: string, path: string): unknown {
    if (path.includes('/predictions')) {
      const id = 'pred-1';
      return {
        id,
        status: method === 'POST' ? 'starting' : 'succeeded',
        output: ['https://replicate.delivery/x.png'],
        urls: { get: `${this.base}/v1/predictions/${id}` },
      };
    }
    if (path.endsWith('/status') || path.includes('/status?')) return { status: 'COMPLETED' };
    if (path.includes('/requests/')) return { images: [{ url: 'https://fal.media/x.png' }] };
    const app = path.split('?')[0].split('/').filter(Boolean).slice(0, 2).join('/');
    return {
      request_id: 'req-1',
      status_url: `${this.base}/${app}/requests/req-1/status`,
      response_url: `${this.base}/${app}/requests/req-1`,
    };
  }

  take(): Captured[] {
    return this.seen.splice(0);
  }
}

const REQUEST: RenderRequest = {
  prompt: 'A lighthouse at dusk',
  seed: 1234,
  width: 1360,
  height: 768,
  resolution: '1K',
  aspectRatio: '16:9',
  quality: null,
  background: null,
  references: [{ data: Buffer.from([0x89, 0x50, 0x4e, 0x47]), contentType: 'image/png' }],
};

/** Without the query string, which the SDKs use for options Kiln does not send. */
const pathOnly = (c: Captured) => ({ ...c, path: c.path.split('?')[0] });

describe('queue upstreams: Kiln sends what the official SDKs send', () => {
  const capture = new CaptureServer();
  const deps = { timeoutMs: 5000, allowPrivate: true, maxImageBytes: 10 * 1024 * 1024 };

  beforeAll(() => capture.start());
  afterAll(() => capture.stop());

  it('fal (@fal-ai/client): submit, status and result', async () => {
    const model = 'fal-ai/flux/dev';
    const kiln = new FalProvider({ type: 'fal', model, baseUrl: capture.base }, { apiKey: 'fal-key:secret', ...deps });
    const submission = await kiln.submit(REQUEST);
    await kiln.poll(submission);
    const kilnCalls = capture.take().map(pathOnly);

    const fal = createFalClient({
      credentials: 'fal-key:secret',
      // The SDK's own URLs, redirected to the capture server: everything else is the SDK's.
      requestMiddleware: (req) => Promise.resolve({ ...req, url: req.url.replace('https://queue.fal.run', capture.base) }),
    });
    const { request_id } = await fal.queue.submit(model, { input: kiln.input(REQUEST) as never });
    await fal.queue.status(model, { requestId: request_id });
    await fal.queue.result(model, { requestId: request_id });
    const sdkCalls = capture.take().map(pathOnly);

    expect(kilnCalls).toHaveLength(3);
    expect(sdkCalls).toHaveLength(3);
    for (let i = 0; i < 3; i++) {
      expect(kilnCalls[i]).toMatchObject({ method: sdkCalls[i].method, path: sdkCalls[i].path, authorization: sdkCalls[i].authorization });
    }
    expect(kilnCalls[0]).toMatchObject({ method: 'POST', path: '/fal-ai/flux/dev', authorization: 'Key fal-key:secret' });
    expect(kilnCalls[1].path).toBe('/fal-ai/flux/requests/req-1/status');
    expect(kilnCalls[0].body).toEqual(sdkCalls[0].body);
    expect(kilnCalls[0].body).toMatchObject({
      prompt: REQUEST.prompt,
      seed: 1234,
      image_size: { width: 1360, height: 768 },
      image_urls: [expect.stringMatching(/^data:image\/png;base64,/)],
    });
  });

  it('replicate (replicate): create a prediction on an official model, then get it', async () => {
    const kiln = new ReplicateProvider(
      { type: 'replicate', model: 'black-forest-labs/flux-schnell', baseUrl: `${capture.base}/v1` },
      { apiKey: 'r8_token', ...deps },
    );
    const submission = await kiln.submit(REQUEST);
    await kiln.poll(submission);
    const kilnCalls = capture.take().map(pathOnly);

    const replicate = new Replicate({ auth: 'r8_token', baseUrl: `${capture.base}/v1` });
    const prediction = await replicate.predictions.create({ model: 'black-forest-labs/flux-schnell', input: kiln.input(REQUEST) });
    await replicate.predictions.get(prediction.id);
    const sdkCalls = capture.take().map(pathOnly);

    expect(kilnCalls).toHaveLength(2);
    expect(sdkCalls).toHaveLength(2);
    for (let i = 0; i < 2; i++) {
      expect(kilnCalls[i]).toMatchObject({ method: sdkCalls[i].method, path: sdkCalls[i].path, authorization: sdkCalls[i].authorization });
    }
    expect(kilnCalls[0]).toMatchObject({
      method: 'POST',
      path: '/v1/models/black-forest-labs/flux-schnell/predictions',
      authorization: 'Bearer r8_token',
    });
    expect(kilnCalls[0].body).toEqual(sdkCalls[0].body);
    expect(kilnCalls[0].body).toEqual({
      input: expect.objectContaining({
        prompt: REQUEST.prompt,
        seed: 1234,
        aspect_ratio: '16:9',
        input_image: expect.stringMatching(/^data:image\/png;base64,/),
      }),
    });
  });
});
