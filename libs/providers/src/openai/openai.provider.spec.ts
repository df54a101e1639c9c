import { AddressInfo } from 'node:net';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import sharp from 'sharp';
import { OpenAiProvider, OpenAiProviderConfig, parseRetryAfter } from './openai.provider';
import { ProviderError, RenderRequest } from '../render.types';

const API_KEY = 'sk-test-secret-0123456789';

interface Captured {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

type Handler = (req: Captured, res: ServerResponse) => void;

/** A fake OpenAI-compatible upstream on 127.0.0.1: each test sets the handler and reads what arrived. */
let server: Server;
let baseUrl: string;
let handler: Handler;
let captured: Captured[];

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) };
      captured.push(entry);
      handler(entry, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  captured = [];
});

function provider(overrides: Partial<OpenAiProviderConfig> = {}): OpenAiProvider {
  return new OpenAiProvider({
    baseUrl,
    apiKey: API_KEY,
    model: 'gpt-image-1',
    timeoutMs: 5000,
    allowPrivate: true, // the fake upstream is on 127.0.0.1
    maxImageBytes: 8 * 1024 * 1024,
    ...overrides,
  });
}

function request(overrides: Partial<RenderRequest> = {}): RenderRequest {
  return {
    prompt: 'a red fox in snow',
    seed: 3,
    width: 1360,
    height: 768,
    resolution: '1K',
    aspectRatio: '16:9',
    quality: 'high',
    background: 'transparent',
    references: [],
    ...overrides,
  };
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

let png1360: Buffer;
let webp32: Buffer;

beforeAll(async () => {
  png1360 = await sharp({ create: { width: 1360, height: 768, channels: 4, background: '#33669980' } })
    .png()
    .toBuffer();
  webp32 = await sharp({ create: { width: 32, height: 48, channels: 3, background: '#336699' } })
    .webp()
    .toBuffer();
});

async function failure(p: Promise<unknown>): Promise<ProviderError> {
  const err = await p.then(
    () => {
      throw new Error('expected the render to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  expect((err as Error).message).not.toContain(API_KEY);
  return err as ProviderError;
}

describe('OpenAiProvider generations', () => {
  it('posts the JSON body with the bearer key and decodes b64_json', async () => {
    handler = (_req, res) => json(res, 200, { created: 1, data: [{ b64_json: png1360.toString('base64') }] });
    const progress: number[] = [];
    const result = await provider().render(request({ onProgress: (p) => progress.push(p) }));

    expect(captured).toHaveLength(1);
    const [call] = captured;
    expect(call.method).toBe('POST');
    expect(call.url).toBe('/v1/images/generations');
    expect(call.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(call.headers['content-type']).toBe('application/json');
    expect(JSON.parse(call.body.toString())).toEqual({
      model: 'gpt-image-1',
      prompt: 'a red fox in snow',
      n: 1,
      size: '1360x768',
      quality: 'high',
      background: 'transparent',
    });
    expect(result).toMatchObject({ contentType: 'image/png', width: 1360, height: 768 });
    expect(result.data.equals(png1360)).toBe(true);
    expect(progress).toEqual([60, 70]);
  });

  it('leaves out auto quality and colour backgrounds, and maps the size', async () => {
    handler = (_req, res) => json(res, 200, { data: [{ b64_json: png1360.toString('base64') }] });
    await provider({ baseUrl: `${baseUrl}/`, sizeMap: { '1360x768': '1536x1024' } }).render(
      request({ quality: 'auto', background: '#FF0000' }),
    );
    expect(captured[0].url).toBe('/v1/images/generations');
    expect(JSON.parse(captured[0].body.toString())).toEqual({
      model: 'gpt-image-1',
      prompt: 'a red fox in snow',
      n: 1,
      size: '1536x1024',
    });
  });

  it('downloads a returned url without sending the key, and sniffs the type', async () => {
    handler = (req, res) => {
      if (req.url === '/files/out.bin') {
        res.writeHead(200, { 'content-type': 'application/octet-stream' });
        res.end(webp32);
        return;
      }
      json(res, 200, { data: [{ url: `${baseUrl.replace('/v1', '')}/files/out.bin` }] });
    };
    const result = await provider().render(request({ quality: null, background: null }));
    expect(captured.map((c) => c.url)).toEqual(['/v1/images/generations', '/files/out.bin']);
    expect(captured[1].method).toBe('GET');
    expect(captured[1].headers.authorization).toBeUndefined();
    expect(result).toMatchObject({ contentType: 'image/webp', width: 32, height: 48 });
  });
});

describe('OpenAiProvider edits', () => {
  it('posts multipart with every reference as image[]', async () => {
    handler = (_req, res) => json(res, 200, { data: [{ b64_json: png1360.toString('base64') }] });
    const refA = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#FF0000' } })
      .png()
      .toBuffer();
    const refB = await sharp({ create: { width: 8, height: 8, channels: 3, background: '#00FF00' } })
      .jpeg()
      .toBuffer();
    await provider().render(
      request({
        quality: 'medium',
        background: null,
        references: [
          { data: refA, contentType: 'image/png' },
          { data: refB, contentType: 'image/jpeg' },
        ],
      }),
    );

    const [call] = captured;
    expect(call.url).toBe('/v1/images/edits');
    expect(call.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(call.headers['content-type']).toMatch(/^multipart\/form-data; boundary=/);
    const form = await new Response(new Uint8Array(call.body), { headers: { 'content-type': call.headers['content-type']! } }).formData();
    expect(form.get('model')).toBe('gpt-image-1');
    expect(form.get('prompt')).toBe('a red fox in snow');
    expect(form.get('size')).toBe('1360x768');
    expect(form.get('n')).toBe('1');
    expect(form.get('quality')).toBe('medium');
    expect(form.get('background')).toBeNull();
    const images = form.getAll('image[]') as File[];
    expect(images.map((f) => [f.name, f.type])).toEqual([
      ['ref-0.png', 'image/png'],
      ['ref-1.jpg', 'image/jpeg'],
    ]);
    expect(Buffer.from(await images[0].arrayBuffer()).equals(refA)).toBe(true);
    expect(Buffer.from(await images[1].arrayBuffer()).equals(refB)).toBe(true);
  });
});

describe('OpenAiProvider failures', () => {
  it('429 is a retryable rate limit honouring Retry-After in seconds', async () => {
    handler = (_req, res) =>
      json(res, 429, { error: { message: 'Rate limit reached', code: 'rate_limit_exceeded' } }, { 'retry-after': '7' });
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'rate_limited', retryable: true, retryAfterMs: 7000, status: 429 });
    expect(err.message).toBe('Upstream rate limit reached (429): Rate limit reached');
  });

  it('429 with Retry-After as an HTTP date', async () => {
    const at = new Date(Date.now() + 30_000).toUTCString();
    handler = (_req, res) => json(res, 429, { error: { message: 'slow down' } }, { 'retry-after': at });
    const err = await failure(provider().render(request()));
    expect(err.kind).toBe('rate_limited');
    expect(err.retryAfterMs).toBeGreaterThan(25_000);
    expect(err.retryAfterMs).toBeLessThanOrEqual(30_000);
  });

  it('429 for an exhausted quota is not worth retrying', async () => {
    handler = (_req, res) => json(res, 429, { error: { message: 'You exceeded your current quota', code: 'insufficient_quota' } });
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'upstream_error', retryable: false, upstreamCode: 'insufficient_quota' });
  });

  it('5xx is retryable', async () => {
    handler = (_req, res) => json(res, 500, { error: { message: 'The server had an error' } });
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'upstream_error', retryable: true, status: 500 });
    expect(err.retryAfterMs).toBeUndefined();
  });

  it('400 is not retryable and quotes the upstream message, shortened and without the key', async () => {
    handler = (_req, res) =>
      json(res, 400, {
        error: { message: `Invalid size for key ${API_KEY}. ${'x'.repeat(400)}`, code: 'invalid_value' },
      });
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'bad_request', retryable: false, status: 400, upstreamCode: 'invalid_value' });
    expect(err.message.startsWith('Upstream refused the request (400): Invalid size for key [redacted].')).toBe(true);
    expect(err.message.length).toBeLessThanOrEqual('Upstream refused the request (400): '.length + 200);
  });

  it('an upstream that does not answer in time is a retryable timeout', async () => {
    handler = () => {
      // never answers
    };
    const started = Date.now();
    const err = await failure(provider({ timeoutMs: 150 }).render(request()));
    expect(err).toMatchObject({ kind: 'timeout', retryable: true });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('a url download that does not finish in time is a retryable timeout', async () => {
    handler = (req, res) => {
      if (req.url === '/files/slow.png') return; // never answers
      json(res, 200, { data: [{ url: `${baseUrl.replace('/v1', '')}/files/slow.png` }] });
    };
    const err = await failure(provider({ timeoutMs: 150 }).render(request()));
    expect(err).toMatchObject({ kind: 'timeout', retryable: true });
  });

  it('a caller abort rejects with the caller reason, not a provider error', async () => {
    handler = () => {
      // never answers
    };
    const controller = new AbortController();
    const reason = new Error('batch cancelled');
    setTimeout(() => controller.abort(reason), 50);
    await expect(provider().render(request({ signal: controller.signal }))).rejects.toBe(reason);
  });

  it('an unreachable upstream is retryable', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const err = await failure(provider({ baseUrl: `http://127.0.0.1:${port}/v1` }).render(request()));
    expect(err).toMatchObject({ kind: 'upstream_error', retryable: true });
    expect(err.message).toBe('Could not reach the image provider (ECONNREFUSED)');
  });

  it.each([
    ['not JSON', (res: ServerResponse) => res.end('<html>oops</html>')],
    ['no data', (res: ServerResponse) => json(res, 200, { data: [] })],
    ['not an image', (res: ServerResponse) => json(res, 200, { data: [{ b64_json: Buffer.from('hello').toString('base64') }] })],
    ['a bad url', (res: ServerResponse) => json(res, 200, { data: [{ url: 'file:///etc/passwd' }] })],
  ])('a malformed response (%s) is not retryable', async (_name, respond) => {
    handler = (_req, res) => respond(res);
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'invalid_response', retryable: false });
  });
});

describe('OpenAiProvider: upstream answers are untrusted', () => {
  /** Another local service, standing for anything internal the generator can reach. */
  let internal: Server;
  let internalOrigin: string;
  let internalHits: string[];

  beforeAll(async () => {
    internal = createServer((req, res) => {
      internalHits.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'image/webp' }).end(webp32);
    });
    await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
    internalOrigin = `http://127.0.0.1:${(internal.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    internal.closeAllConnections();
    await new Promise((resolve) => internal.close(resolve));
  });
  beforeEach(() => {
    internalHits = [];
  });

  const upstreamOrigin = () => baseUrl.replace('/v1', '');

  it('asks for base64 unless the model always answers so (gpt-image models refuse the parameter)', async () => {
    handler = (_req, res) => json(res, 200, { data: [{ b64_json: png1360.toString('base64') }] });
    await provider({ model: 'dall-e-3' }).render(request());
    await provider({ model: 'gpt-image-1' }).render(request());
    expect(JSON.parse(captured[0].body.toString()).response_format).toBe('b64_json');
    expect(JSON.parse(captured[1].body.toString())).not.toHaveProperty('response_format');
  });

  it('uses b64_json when the upstream sends both, fetching nothing', async () => {
    handler = (_req, res) => json(res, 200, { data: [{ b64_json: png1360.toString('base64'), url: `${internalOrigin}/other.webp` }] });
    const result = await provider().render(request());
    expect(result.data.equals(png1360)).toBe(true);
    expect(captured).toHaveLength(1);
    expect(internalHits).toHaveLength(0);
  });

  it.each([
    ['another local port', () => `${internalOrigin}/secret.webp`],
    ['the metadata service', () => 'http://169.254.169.254/latest/meta-data/iam/security-credentials/'],
    ['a private network over https', () => 'https://10.0.0.5/image.png'],
    ['a name resolving to loopback', () => `https://localhost:${new URL(internalOrigin).port}/secret.webp`],
  ])('refuses a result URL pointing at %s, without fetching it, for good', async (_name, target) => {
    handler = (_req, res) => json(res, 200, { data: [{ url: target() }] });
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'invalid_response', retryable: false });
    expect(err.message).toMatch(/^The image provider returned an image URL that is refused: /);
    expect(internalHits).toHaveLength(0);
  });

  it('refuses a result URL that redirects, even on the upstream origin', async () => {
    handler = (req, res) => {
      if (req.url === '/files/moved.png') return void res.writeHead(302, { location: `${internalOrigin}/secret.webp` }).end();
      json(res, 200, { data: [{ url: `${upstreamOrigin()}/files/moved.png` }] });
    };
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'invalid_response', retryable: false });
    expect(err.message).toBe('The image provider returned an image URL that is refused: Redirects are not followed (302)');
    expect(internalHits).toHaveLength(0);
  });

  it('refuses a result URL that does not serve an image', async () => {
    handler = (req, res) => {
      if (req.url === '/files/page') return void res.writeHead(200, { 'content-type': 'text/html' }).end('<html></html>');
      json(res, 200, { data: [{ url: `${upstreamOrigin()}/files/page` }] });
    };
    const err = await failure(provider().render(request()));
    expect(err).toMatchObject({ kind: 'invalid_response', retryable: false });
  });

  it('stops reading a 300 MB body at the cap, quickly and without holding it', async () => {
    const total = 300 * 1024 * 1024;
    let sent = 0;
    handler = (req, res) => {
      if (req.url !== '/files/huge.png') return json(res, 200, { data: [{ url: `${upstreamOrigin()}/files/huge.png` }] });
      res.writeHead(200, { 'content-type': 'image/png' });
      const chunk = Buffer.alloc(256 * 1024, 1);
      const pump = () => {
        while (sent < total && !res.destroyed) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      pump();
    };
    const before = process.memoryUsage();
    const started = Date.now();
    const err = await failure(provider({ timeoutMs: 60_000, maxImageBytes: 8 * 1024 * 1024 }).render(request()));
    const after = process.memoryUsage();
    expect(err).toMatchObject({ kind: 'invalid_response', retryable: false, message: 'The generated image is larger than 8 MB' });
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(sent).toBeLessThan(100 * 1024 * 1024);
    // Generous: the cap is 8 MB; holding the body would add 300 MB.
    expect(after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers)).toBeLessThan(100 * 1024 * 1024);
  });

  it('refuses a loopback base URL unless private upstreams are allowed, without calling it', async () => {
    handler = (_req, res) => json(res, 200, { data: [{ b64_json: png1360.toString('base64') }] });
    const err = await failure(provider({ allowPrivate: false }).render(request()));
    expect(err).toMatchObject({ kind: 'not_configured', retryable: false });
    expect(err.message).toBe(
      "The image provider's address is refused: The host resolves to a non-public address (loopback); the operator's UPSTREAM_ALLOW_PRIVATE=true allows private addresses and http",
    );
    expect(captured).toHaveLength(0);
  });

  it('refuses an upstream answer larger than a base64 image under the cap could be', async () => {
    handler = (_req, res) => json(res, 200, { data: [{ b64_json: 'A'.repeat(3 * 1024 * 1024) }] });
    const err = await failure(provider({ maxImageBytes: 1024 * 1024 }).render(request()));
    expect(err).toMatchObject({ kind: 'invalid_response', retryable: false });
    expect(err.message).toMatch(/^The image provider's answer is too large/);
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-01-01T00:00:00Z');
  it.each([
    [{ 'retry-after': '3' }, 3000],
    [{ 'retry-after': '1.5' }, 1500],
    [{ 'retry-after': 'Wed, 01 Jan 2025 00:00:10 GMT' }, 10_000],
    [{ 'retry-after': 'Tue, 31 Dec 2024 23:59:00 GMT' }, 0],
    [{ 'retry-after': 'soon' }, undefined],
    [{ 'retry-after-ms': '250', 'retry-after': '3' }, 250],
    [{}, undefined],
  ])('%j -> %s', (headers, expected) => {
    expect(parseRetryAfter(new Headers(headers as Record<string, string>), now)).toBe(expected);
  });
});
