import { TestingModule } from '@nestjs/testing';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import sharp from 'sharp';
import { buildConfig, KilnConfig } from '@app/config';
import { ProviderRoute } from '@app/database';
import {
  TestAccount,
  TestApp,
  createBatch,
  createBatchVia,
  download,
  fileEnvironment,
  FileEnvironment,
  getBatch,
  refundRows,
  solidPng,
  taskRows,
  upload,
  waitForBatchDone,
} from '@app/testing';
import { bootApi, bootGenerator } from './helpers/apps';
import { LocalServer } from './helpers/local-server';

const UPSTREAM_KEY = 'sk-test-kiln-upstream';
const OTHER_KEY = 'sk-test-kiln-other';

interface SeenRequest {
  path: string;
  authorization: string | undefined;
  contentType: string;
  prompt: string;
  json?: Record<string, unknown>;
  form?: FormData;
  at: number;
}

/** Stands for anything internal the generator can reach: it must never be asked for anything. */
class InternalService extends LocalServer {
  readonly hits: string[] = [];
  protected handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.hits.push(req.url ?? '');
    void sharp({ create: { width: 64, height: 64, channels: 3, background: '#000000' } })
      .png()
      .toBuffer()
      .then((png) => res.writeHead(200, { 'content-type': 'image/png' }).end(png));
  }
}

const HUGE_BODY_BYTES = 300 * 1024 * 1024;

/**
 * A local OpenAI-compatible images endpoint. The prompt picks the behaviour:
 * [429-once] rate-limits the first call, [500] always fails, [400] refuses, [hang] never
 * answers, [slow] answers after 150 ms, [url] answers with a URL instead of base64,
 * [both] with base64 and a URL to the internal service, [internal-url] [metadata-url]
 * [private-url] with a URL to an internal address, [redirect-url] with a URL on its own
 * origin that redirects to the internal service, [huge-url] with a URL on its own origin
 * serving a 300 MB body, streamed lazily.
 */
class FakeUpstream extends LocalServer {
  readonly seen: SeenRequest[] = [];
  readonly returned = new Map<string, Buffer>();
  inFlight = 0;
  maxInFlight = 0;
  private readonly perPrompt = new Map<string, number>();
  private readonly images = new Map<string, Buffer>();
  hugeBytesSent = 0;

  constructor(private readonly internal: InternalService) {
    super();
  }

  requestsFor(prompt: string): SeenRequest[] {
    return this.seen.filter((r) => r.prompt === prompt);
  }

  protected async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks);
    if (req.method === 'GET' && req.url?.startsWith('/img/')) {
      const image = this.images.get(req.url);
      res.writeHead(image ? 200 : 404, { 'content-type': 'image/png' }).end(image);
      return;
    }
    if (req.method === 'GET' && req.url === '/redirect') {
      return void res.writeHead(302, { location: `${this.internal.base}/secret.png` }).end();
    }
    if (req.method === 'GET' && req.url === '/huge') return this.streamHuge(res);
    const contentType = String(req.headers['content-type'] ?? '');
    let json: Record<string, unknown> | undefined;
    let form: FormData | undefined;
    if (contentType.startsWith('application/json')) json = JSON.parse(raw.toString('utf8'));
    else form = await new Response(raw, { headers: { 'content-type': contentType } }).formData();
    // A text field of either body: the JSON member or the multipart form's text part.
    const field = (name: string): string | undefined => {
      const value = json?.[name] ?? form?.get(name);
      return typeof value === 'string' ? value : undefined;
    };
    const prompt = field('prompt') ?? '';
    this.seen.push({ path: req.url ?? '', authorization: req.headers.authorization, contentType, prompt, json, form, at: Date.now() });
    const n = (this.perPrompt.get(prompt) ?? 0) + 1;
    this.perPrompt.set(prompt, n);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    res.on('close', () => this.inFlight--);

    const fail = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    if (prompt.includes('[hang]')) return;
    if (prompt.includes('[429-once]') && n === 1) {
      return void fail(429, { error: { message: 'Rate limit reached for images', type: 'requests' } }, { 'retry-after-ms': '300' });
    }
    if (prompt.includes('[500]')) return void fail(500, { error: { message: 'The server had an error', type: 'server_error' } });
    if (prompt.includes('[400]')) {
      return void fail(400, { error: { message: 'Your request was rejected by the safety system', code: 'content_policy_violation' } });
    }
    if (prompt.includes('[slow]')) await new Promise((r) => setTimeout(r, 150));

    const size = field('size') ?? '64x64';
    const [w, h] = size.split('x').map(Number);
    const image = await sharp({ create: { width: w, height: h, channels: 4, background: { r: 250, g: 0, b: 250, alpha: 1 } } })
      .png()
      .toBuffer();
    this.returned.set(prompt, image);
    const urlAnswer = (url: string) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ url }] }));
    if (prompt.includes('[internal-url]')) return void urlAnswer(`${this.internal.base}/secret.png`);
    if (prompt.includes('[metadata-url]')) return void urlAnswer('http://169.254.169.254/latest/meta-data/iam/security-credentials/');
    if (prompt.includes('[private-url]')) return void urlAnswer('https://10.0.0.9/image.png');
    if (prompt.includes('[redirect-url]')) return void urlAnswer(`${this.base}/redirect`);
    if (prompt.includes('[huge-url]')) return void urlAnswer(`${this.base}/huge`);
    if (prompt.includes('[both]')) {
      const body = { data: [{ b64_json: image.toString('base64'), url: `${this.internal.base}/secret.png` }] };
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    }
    if (prompt.includes('[url]')) {
      const path = `/img/${this.seen.length}.png`;
      this.images.set(path, image);
      return void res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ data: [{ url: `${this.base}${path}` }] }));
    }
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ created: 1, data: [{ b64_json: image.toString('base64') }] }));
  }

  /** A PNG signature, then junk, written only as fast as the reader takes it. */
  private streamHuge(res: http.ServerResponse): void {
    res.writeHead(200, { 'content-type': 'image/png' });
    const chunk = Buffer.alloc(256 * 1024, 0x41);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(chunk);
    const pump = () => {
      while (this.hugeBytesSent < HUGE_BODY_BYTES && !res.destroyed) {
        this.hugeBytesSent += chunk.length;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    pump();
  }
}

/** Every file under a directory, recursively (result objects of the local storage driver). */
function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs
    .readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => e.name);
}

jest.setTimeout(60_000);

describe('generator: the openai provider against a local upstream', () => {
  let env: FileEnvironment;
  let config: KilnConfig;
  let api: TestApp;
  let gen: TestingModule;
  const internal = new InternalService();
  const upstream = new FakeUpstream(internal);
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-gen-openai-'));
  let a: TestAccount;

  const route = (extra: Partial<Extract<ProviderRoute, { type: 'openai' }>> = {}): ProviderRoute => ({
    type: 'openai',
    baseUrl: `${upstream.base}/v1`,
    model: 'up-image-1',
    ...extra,
  });

  const batchVia = (model: string, r: ProviderRoute, body: Record<string, unknown>): Promise<string> =>
    createBatchVia(api, a, model, r, body);

  beforeAll(async () => {
    await internal.start();
    await upstream.start();
    const base = buildConfig(process.env);
    env = await fileEnvironment('gen_openai', {
      // The fake upstream is on 127.0.0.1; its result URLs may use its own origin, nothing else.
      upstream: { ...base.upstream, allowPrivate: true },
      storage: { ...base.storage, dataDir },
      providerApiKeys: { OPENAI_API_KEY: UPSTREAM_KEY, KILN_TEST_OTHER_API_KEY: OTHER_KEY },
      generator: { concurrency: 8, maxAttempts: 3, backoffMs: 50, modelConcurrencyCap: 2, reconcileIntervalMs: 600_000 },
    });
    config = env.config;
    api = await bootApi(config);
    gen = await bootGenerator(config);
    a = await api.account({ plan: 'scale', credits: 5000 });
  });
  afterAll(async () => {
    await gen?.close();
    await api?.close();
    await upstream.stop();
    await internal.stop();
    await env?.teardown();
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('generations: the request carries the model, size, key and only the supported options', async () => {
    const full = await batchVia('alpha-image-2-5', route(), {
      prompts: ['A cat [plain]', 'A dog [url]'],
      aspectRatio: '16:9',
      quality: 'high',
      background: 'transparent',
    });
    const plain = await batchVia('gamma-5-pro', route(), { prompts: ['A cow [plain]'], quality: 'high', background: 'transparent' });
    await Promise.all([waitForBatchDone(api, full), waitForBatchDone(api, plain)]);

    const [cat] = upstream.requestsFor('A cat [plain]');
    expect(cat).toMatchObject({ path: '/v1/images/generations', authorization: `Bearer ${UPSTREAM_KEY}` });
    expect(cat.contentType).toMatch(/^application\/json/);
    expect(cat.json).toEqual({
      model: 'up-image-1',
      prompt: 'A cat [plain]',
      n: 1,
      size: '1360x768',
      quality: 'high',
      background: 'transparent',
      response_format: 'b64_json',
    });
    const [cow] = upstream.requestsFor('A cow [plain]');
    expect(cow.json).toEqual({ model: 'up-image-1', prompt: 'A cow [plain]', n: 1, size: '1024x1024', response_format: 'b64_json' });

    const { batch, tasks } = await getBatch(api, a, full);
    expect(batch).toMatchObject({ status: 'succeeded', done: true });
    expect(batch.previewUrl).toBeTruthy();
    for (const t of tasks) {
      const file = await download(api, t.resultUrls[0]);
      expect(file.body.equals(upstream.returned.get(t.prompt)!)).toBe(true);
      expect(await sharp(file.body).metadata()).toMatchObject({ width: 1360, height: 768, format: 'png' });
      expect(t).toMatchObject({ width: 1360, height: 768, errorCode: null });
    }
  });

  it('edits: reference images go to /images/edits as multipart, byte for byte', async () => {
    const green = await solidPng(32, 32, { r: 0, g: 255, b: 0 });
    const blue = await solidPng(48, 48, { r: 0, g: 0, b: 255 });
    const refs = [await upload(api, a, green, 'green.png'), await upload(api, a, blue, 'blue.png')];
    const id = await batchVia('alpha-image-2-5', route(), {
      prompts: ['Edit me [plain]'],
      refMode: 'combined',
      refImages: refs,
      quality: 'low',
    });
    await waitForBatchDone(api, id);
    expect((await getBatch(api, a, id)).batch.status).toBe('succeeded');
    const [req] = upstream.requestsFor('Edit me [plain]');
    expect(req.path).toBe('/v1/images/edits');
    expect(req.contentType).toMatch(/^multipart\/form-data; boundary=/);
    expect(req.authorization).toBe(`Bearer ${UPSTREAM_KEY}`);
    const form = req.form!;
    expect({ model: form.get('model'), n: form.get('n'), size: form.get('size'), quality: form.get('quality') }).toEqual({
      model: 'up-image-1',
      n: '1',
      size: '1024x1024',
      quality: 'low',
    });
    const images = form.getAll('image[]') as File[];
    expect(images).toHaveLength(2);
    expect(Buffer.from(await images[0].arrayBuffer()).equals(green)).toBe(true);
    expect(Buffer.from(await images[1].arrayBuffer()).equals(blue)).toBe(true);
    expect(images[0].type).toBe('image/png');
  });

  it('429 then success: asked again after the upstream Retry-After within the same attempt, one charge, no refund', async () => {
    const id = await batchVia('alpha-image-2-5', route(), { prompts: ['Busy [429-once]'] });
    await waitForBatchDone(api, id);
    const [task] = await taskRows(api, id);
    expect(task).toMatchObject({ status: 'succeeded', attempts: 1, progress: 100 });
    const calls = upstream.requestsFor('Busy [429-once]');
    expect(calls).toHaveLength(2);
    expect(calls[1].at - calls[0].at).toBeGreaterThanOrEqual(290);
    expect(await refundRows(api, id)).toHaveLength(0);
  });

  it('500 until the attempts run out: failed with an honest error, refunded once', async () => {
    const before = await api.balance(a.id);
    const id = await batchVia('alpha-image-2-5', route(), { prompts: ['Broken [500]'] });
    await waitForBatchDone(api, id);
    const { batch, tasks } = await getBatch(api, a, id);
    expect(tasks[0]).toMatchObject({
      status: 'failed',
      error: 'Upstream error (500): The server had an error (gave up after 3 attempts)',
      errorCode: 'upstream_unavailable',
      resultUrls: [],
      width: null,
      height: null,
    });
    expect(upstream.requestsFor('Broken [500]')).toHaveLength(3);
    expect(batch).toMatchObject({ status: 'failed', creditsCharged: 5, creditsRefunded: 5 });
    expect(await refundRows(api, id)).toHaveLength(1);
    expect(await api.balance(a.id)).toBe(before);
    expect(await api.ledgerSum(a.id)).toBe(before);
  });

  it('a timeout is retried, then fails and is refunded', async () => {
    const id = await batchVia('alpha-image-2-5', route({ timeoutMs: 300 }), { prompts: ['Never answers [hang]'] });
    await waitForBatchDone(api, id);
    const [task] = await taskRows(api, id);
    expect(task).toMatchObject({
      status: 'failed',
      attempts: 3,
      error: 'The image provider did not answer within 0.3 s (gave up after 3 attempts)',
      error_code: 'upstream_unavailable',
    });
    expect(upstream.requestsFor('Never answers [hang]')).toHaveLength(3);
    expect(await refundRows(api, id)).toHaveLength(1);
  });

  it('a refusal (400) fails at once, without retrying', async () => {
    const id = await batchVia('alpha-image-2-5', route(), { prompts: ['Refused [400]'] });
    await waitForBatchDone(api, id);
    const [task] = await taskRows(api, id);
    expect(task).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: 'Upstream refused the request (400): Your request was rejected by the safety system',
      // A content policy refusal (the fake answers code content_policy_violation): v1.2's own code.
      error_code: 'content_refused',
    });
    expect(upstream.requestsFor('Refused [400]')).toHaveLength(1);
  });

  it('apiKeyEnv picks another key; a key that is not configured fails the task clearly', async () => {
    const other = await batchVia('alpha-image-2-5', route({ apiKeyEnv: 'KILN_TEST_OTHER_API_KEY' }), { prompts: ['Other key [plain]'] });
    // The admin API refuses a route the generators have no key for (GET /v1/admin/models
    // reports it); one written behind its back still fails its tasks clearly.
    const refused = await api
      .admin('patch', '/v1/admin/models/alpha-image-2-5')
      .send({ provider: route({ apiKeyEnv: 'KILN_TEST_MISSING_API_KEY' }) });
    expect(refused.status).toBe(400);
    expect(refused.body.error.details).toMatchObject({ field: 'provider.apiKeyEnv', missing: ['KILN_TEST_MISSING_API_KEY'] });
    await api.db.query(`UPDATE models SET provider = $1 WHERE key = 'alpha-image-2-5'`, [
      route({ apiKeyEnv: 'KILN_TEST_MISSING_API_KEY' }),
    ]);
    let missing: string;
    try {
      missing = await createBatch(api, a, { model: 'alpha-image-2-5', prompts: ['No key [plain]'] });
    } finally {
      await api
        .admin('patch', '/v1/admin/models/alpha-image-2-5')
        .send({ provider: { type: 'builtin' } })
        .expect(200);
    }
    await Promise.all([waitForBatchDone(api, other), waitForBatchDone(api, missing)]);
    expect(upstream.requestsFor('Other key [plain]')[0].authorization).toBe(`Bearer ${OTHER_KEY}`);
    expect(upstream.requestsFor('No key [plain]')).toHaveLength(0);
    const [task] = await taskRows(api, missing);
    expect(task).toMatchObject({
      status: 'failed',
      attempts: 1,
      error: 'The image provider is not configured: KILN_TEST_MISSING_API_KEY is not set',
    });
    const { tasks } = await getBatch(api, a, missing);
    expect(tasks[0]).toMatchObject({ status: 'failed', errorCode: 'provider_not_configured', width: null, height: null });
  });

  it('b64_json is used when the upstream sends both, and its URL is never fetched', async () => {
    const id = await batchVia('alpha-image-2-5', route(), { prompts: ['Both [both]'] });
    await waitForBatchDone(api, id);
    const { tasks } = await getBatch(api, a, id);
    expect(tasks[0]).toMatchObject({ status: 'succeeded' });
    expect((await download(api, tasks[0].resultUrls[0])).body.equals(upstream.returned.get('Both [both]')!)).toBe(true);
    expect(internal.hits).toHaveLength(0);
  });

  it('result URLs at internal addresses, or redirecting to one, fail at once, refunded, with nothing fetched or published', async () => {
    const prompts = ['Other port [internal-url]', 'Metadata [metadata-url]', 'Private [private-url]', 'Redirect [redirect-url]'];
    const before = await api.balance(a.id);
    const filesBefore = filesUnder(path.join(dataDir, 'files', 'results')).length;
    const id = await batchVia('alpha-image-2-5', route(), { prompts });
    await waitForBatchDone(api, id);

    const rows = await taskRows(api, id);
    expect(rows.map((t) => [t.prompt, t.status, t.attempts, t.result_key])).toEqual(prompts.map((p) => [p, 'failed', 1, null]));
    const errors = Object.fromEntries(rows.map((t) => [t.prompt, t.error]));
    expect(errors).toEqual({
      'Other port [internal-url]':
        'The image provider returned an image URL that is refused: The host resolves to a non-public address (loopback)',
      'Metadata [metadata-url]':
        'The image provider returned an image URL that is refused: The host resolves to a non-public address (link-local)',
      'Private [private-url]':
        'The image provider returned an image URL that is refused: The host resolves to a non-public address (private)',
      'Redirect [redirect-url]': 'The image provider returned an image URL that is refused: Redirects are not followed (302)',
    });
    expect(internal.hits).toHaveLength(0);
    expect(await refundRows(api, id)).toHaveLength(prompts.length);
    expect(await api.balance(a.id)).toBe(before);
    expect(await api.ledgerSum(a.id)).toBe(before);
    expect(filesUnder(path.join(dataDir, 'files', 'results')).length).toBe(filesBefore);
  });

  it('a 300 MB result body fails the task quickly, refunded, without the generator holding it', async () => {
    const before = await api.balance(a.id);
    global.gc?.();
    const baseline = process.memoryUsage().rss;
    let peak = baseline;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 10);
    const started = Date.now();
    try {
      const id = await batchVia('alpha-image-2-5', route(), { prompts: ['Enormous [huge-url]'] });
      await waitForBatchDone(api, id);
      const [task] = await taskRows(api, id);
      expect(task).toMatchObject({ status: 'failed', attempts: 1, error: 'The generated image is larger than 50 MB', result_key: null });
      expect(await refundRows(api, id)).toHaveLength(1);
    } finally {
      clearInterval(sampler);
    }
    // Generous bounds for a loaded machine: reading the whole body took seconds and added
    // 600 MB; the cap stops it at 50 MB.
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(upstream.hugeBytesSent).toBeLessThan(HUGE_BODY_BYTES / 2);
    expect(peak - baseline).toBeLessThan(200 * 1024 * 1024);
    expect(await api.balance(a.id)).toBe(before);
  });

  it('the per-model cap holds across two generator replicas sharing Redis', async () => {
    const second = await bootGenerator(config);
    try {
      upstream.maxInFlight = 0;
      const id = await batchVia('alpha-image-2-5', route(), {
        prompts: Array.from({ length: 12 }, (_, i) => `Capped ${i} [slow]`),
      });
      await waitForBatchDone(api, id);
      expect((await getBatch(api, a, id)).batch.status).toBe('succeeded');
      expect(upstream.maxInFlight).toBe(2);
    } finally {
      await second.close();
    }
  });
});
