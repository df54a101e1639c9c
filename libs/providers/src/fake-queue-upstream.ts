import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import type { CapturedRequest, FakeAnswer, FakeUpstream } from './provider-type';

export type QueueDialect = 'fal' | 'replicate' | 'bfl';

export interface FakeQueueOptions {
  /** How long a request stays queued before it is made (default 300 ms). */
  queueMs?: number;
  /** The made image's size; default: what the request asked (or 1024 on the long side for a ratio). */
  imageSize?: { width: number; height: number };
  /** Where `[private-url]` points: an address the generator must refuse. */
  privateImageBase?: string;
}

/** One request the fake saw. */
export interface FakeSeen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown> | null;
  at: number;
}

interface FakeRequest {
  id: string;
  prompt: string;
  input: Record<string, unknown>;
  readyAt: number;
  polls: number;
  submittedAt: number;
  lastPollAt: number;
  /** Shortest time between two polls of this request. */
  minGapMs: number;
  /** The request's own outcome once made. */
  outcome: 'ok' | 'refused' | 'failed' | 'nsfw' | 'not-image' | 'private-url' | 'no-image';
}

/**
 * A local stand-in for a queue upstream (fal, Replicate or BFL, by dialect) on 127.0.0.1, for
 * tests and the bench. The prompt picks the behaviour: [refuse] the request is refused for
 * its content once made, [refuse-submit] at the submit, [nsfw] (fal) the safety checker's
 * verdict, [fail-once] the first request for the prompt fails upstream, [429-once] /
 * [500-once] / [hang-once] the first submit answers 429 with Retry-After: 1 / 500 / nothing,
 * [poll-500] the first two polls answer 500, [not-image] the image URL serves junk,
 * [private-url] the image URL points at `privateImageBase`, [no-image] made without an image.
 * It counts submits per prompt and every poll, and keeps what it was sent.
 */
export class FakeQueueUpstream implements FakeUpstream {
  readonly seen: FakeSeen[] = [];
  /** What it was sent, as every type's fake records it (FakeUpstream). */
  readonly requests: CapturedRequest[] = [];
  private readonly scripted: (FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>))[] = [];
  readonly submitsByPrompt = new Map<string, number>();
  polls = 0;
  submits = 0;
  root = '';
  private readonly server: http.Server;
  private readonly made = new Map<string, FakeRequest>();
  private readonly firstSeen = new Set<string>();
  private readonly pngs = new Map<string, Promise<Buffer>>();
  private next = 0;

  constructor(
    readonly dialect: QueueDialect,
    private readonly options: FakeQueueOptions = {},
  ) {
    this.server = http.createServer((req, res) => void this.handle(req, res).catch(() => res.destroy()));
    this.server.keepAliveTimeout = 5000;
  }

  /** The route's baseUrl for this fake. */
  get baseUrl(): string {
    return this.dialect === 'fal' ? this.root : `${this.root}/v1`;
  }

  /** Keeps only counts, not bodies (the bench sends thousands). */
  recordBodies = true;

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.root = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  /** The next requests get these answers, in order, before the dialect's own (FakeUpstream). */
  answerNext(...answers: (FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>))[]): void {
    this.scripted.push(...answers);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  /**
   * Polling as the upstream saw it: status checks per request and per poll interval (polls
   * over the time from submit to the last poll), and the shortest gap between two polls of
   * one request.
   */
  pollingStats(intervalMs: number): { requests: number; polls: number; pollsPerInterval: number; minGapMs: number } {
    let polls = 0;
    let intervals = 0;
    let minGapMs = Infinity;
    for (const r of this.made.values()) {
      polls += r.polls;
      if (r.lastPollAt > 0) intervals += Math.max(1, (r.lastPollAt - r.submittedAt) / intervalMs);
      minGapMs = Math.min(minGapMs, r.minGapMs);
    }
    return { requests: this.made.size, polls, pollsPerInterval: intervals > 0 ? polls / intervals : 0, minGapMs };
  }

  submitsFor(prompt: string): number {
    return this.submitsByPrompt.get(prompt) ?? 0;
  }

  /** Requests whose path the test names (submits, polls). */
  seenAt(pattern: RegExp): FakeSeen[] {
    return this.seen.filter((s) => pattern.test(s.path));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: Record<string, unknown> | null = null;
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : null;
    } catch {
      body = null;
    }
    const url = new URL(req.url ?? '/', this.root);
    if (this.recordBodies) {
      this.seen.push({ method: req.method ?? '', path: `${url.pathname}${url.search}`, headers: req.headers, body, at: Date.now() });
      this.requests.push({ method: req.method ?? '', path: `${url.pathname}${url.search}`, headers: req.headers, body: Buffer.concat(chunks), receivedAt: Date.now() });
    }
    const scripted = this.scripted.shift();
    if (scripted) {
      const answer = typeof scripted === 'function' ? await scripted(this.requests[this.requests.length - 1]) : scripted;
      if (answer === 'hang') return;
      res.writeHead(answer.status, answer.headers ?? {}).end(answer.body);
      return;
    }

    if (req.method === 'GET' && url.pathname.startsWith('/files/')) return this.serveImage(url.pathname, res);
    if (req.method === 'POST' && this.isSubmit(url.pathname)) return this.submit(body, res);
    if (req.method === 'GET') {
      const id = this.requestIdOf(url);
      if (id !== null) return this.poll(id, url, res);
    }
    json(res, 404, { detail: 'Not found' });
  }

  private isSubmit(path: string): boolean {
    if (this.dialect === 'replicate') return /^\/v1\/models\/[^/]+\/[^/]+\/predictions$/.test(path);
    if (this.dialect === 'bfl') return path.startsWith('/v1/') && path !== '/v1/get_result';
    return !path.includes('/requests/');
  }

  private requestIdOf(url: URL): string | null {
    if (this.dialect === 'replicate') return /^\/v1\/predictions\/([^/]+)$/.exec(url.pathname)?.[1] ?? null;
    if (this.dialect === 'bfl') return url.pathname === '/v1/get_result' ? url.searchParams.get('id') : null;
    return /\/requests\/([^/]+)(\/status)?$/.exec(url.pathname)?.[1] ?? null;
  }

  private async submit(body: Record<string, unknown> | null, res: http.ServerResponse): Promise<void> {
    const input = ((this.dialect === 'replicate' ? body?.input : body) ?? {}) as Record<string, unknown>;
    const prompt = String(input.prompt ?? '');
    const first = !this.firstSeen.has(prompt);
    this.firstSeen.add(prompt);
    if (first && prompt.includes('[hang-once]')) return; // never answers: the client's timeout
    if (first && prompt.includes('[429-once]')) return json(res, 429, { detail: 'Rate limited' }, { 'retry-after': '1' });
    if (first && prompt.includes('[500-once]')) return json(res, 500, { detail: 'Internal error' });
    if (prompt.includes('[refuse-submit]')) return this.refuseAtSubmit(res);

    this.submits++;
    this.submitsByPrompt.set(prompt, (this.submitsByPrompt.get(prompt) ?? 0) + 1);
    const id = `req-${++this.next}-${Math.random().toString(36).slice(2, 10)}`;
    const failedBefore = (this.submitsByPrompt.get(prompt) ?? 0) > 1;
    const outcome: FakeRequest['outcome'] = prompt.includes('[refuse]')
      ? 'refused'
      : prompt.includes('[nsfw]')
        ? 'nsfw'
        : prompt.includes('[fail-once]') && !failedBefore
          ? 'failed'
          : prompt.includes('[not-image]')
            ? 'not-image'
            : prompt.includes('[private-url]')
              ? 'private-url'
              : prompt.includes('[no-image]')
                ? 'no-image'
                : 'ok';
    const now = Date.now();
    this.made.set(id, { id, prompt, input, readyAt: now + (this.options.queueMs ?? 300), polls: 0, outcome, submittedAt: now, lastPollAt: 0, minGapMs: Infinity });

    if (this.dialect === 'fal') {
      const app = `${this.root}/${this.appOf(res.req.url ?? '')}/requests/${id}`;
      return json(res, 200, { request_id: id, status_url: `${app}/status`, response_url: app, cancel_url: `${app}/cancel`, queue_position: 0 });
    }
    if (this.dialect === 'replicate') {
      return json(res, 201, { id, status: 'starting', input, urls: { get: `${this.root}/v1/predictions/${id}`, cancel: `${this.root}/v1/predictions/${id}/cancel` } });
    }
    return json(res, 200, { id, polling_url: `${this.root}/v1/get_result?id=${id}` });
  }

  private appOf(path: string): string {
    return path.split('?')[0].split('/').filter(Boolean).slice(0, 2).join('/');
  }

  private refuseAtSubmit(res: http.ServerResponse): void {
    if (this.dialect === 'fal') {
      return json(res, 422, { detail: [{ loc: ['body', 'prompt'], msg: 'The content could not be processed', type: 'content_policy_violation' }] });
    }
    if (this.dialect === 'replicate') return json(res, 422, { title: 'Input rejected', detail: 'The input was flagged as sensitive (NSFW)' });
    return json(res, 400, { detail: 'Request Moderated' });
  }

  private async poll(id: string, url: URL, res: http.ServerResponse): Promise<void> {
    this.polls++;
    const request = this.made.get(id);
    if (!request) return json(res, 404, { detail: 'Request not found' });
    const now = Date.now();
    // Result reads (fal's GET .../requests/{id}) are not polls: only status checks count.
    const isStatusCheck = this.dialect !== 'fal' || url.pathname.endsWith('/status');
    if (isStatusCheck) {
      if (request.lastPollAt > 0) request.minGapMs = Math.min(request.minGapMs, now - request.lastPollAt);
      request.lastPollAt = now;
      request.polls++;
    }
    if (request.prompt.includes('[poll-500]') && request.polls <= 2) return json(res, 500, { detail: 'Poll failed' });
    const ready = Date.now() >= request.readyAt;
    const imageUrl = this.imageUrlOf(request);

    if (this.dialect === 'fal') {
      if (url.pathname.endsWith('/status')) return json(res, ready ? 200 : 202, { status: ready ? 'COMPLETED' : request.polls > 1 ? 'IN_PROGRESS' : 'IN_QUEUE' });
      if (!ready) return json(res, 400, { detail: 'Request is still in progress' });
      if (request.outcome === 'refused') {
        return json(res, 422, { detail: [{ loc: ['body', 'prompt'], msg: 'Content policy violation', type: 'content_policy_violation' }] });
      }
      if (request.outcome === 'failed') return json(res, 500, { detail: 'Internal server error' });
      if (request.outcome === 'no-image') return json(res, 200, { images: [] });
      const size = this.sizeOf(request);
      return json(res, 200, {
        images: [{ url: imageUrl, width: size.width, height: size.height, content_type: 'image/png' }],
        seed: request.input.seed,
        has_nsfw_concepts: [request.outcome === 'nsfw'],
      });
    }
    if (this.dialect === 'replicate') {
      if (!ready) return json(res, 200, { id, status: request.polls > 1 ? 'processing' : 'starting', output: null, error: null });
      if (request.outcome === 'refused') return json(res, 200, { id, status: 'failed', output: null, error: 'NSFW content detected. Try running it again, or try a different prompt.' });
      if (request.outcome === 'failed') return json(res, 200, { id, status: 'failed', output: null, error: 'CUDA out of memory' });
      if (request.outcome === 'no-image') return json(res, 200, { id, status: 'succeeded', output: [] });
      return json(res, 200, { id, status: 'succeeded', output: [imageUrl], error: null });
    }
    if (!ready) return json(res, 200, { id, status: 'Pending', result: null });
    if (request.outcome === 'refused') return json(res, 200, { id, status: 'Content Moderated', result: null });
    if (request.outcome === 'failed') return json(res, 200, { id, status: 'Error', result: null });
    if (request.outcome === 'no-image') return json(res, 200, { id, status: 'Ready', result: {} });
    return json(res, 200, { id, status: 'Ready', result: { sample: imageUrl, prompt: request.prompt, seed: request.input.seed } });
  }

  private imageUrlOf(request: FakeRequest): string {
    if (request.outcome === 'private-url') return `${this.options.privateImageBase ?? 'http://10.0.0.1'}/files/${request.id}.png`;
    return `${this.root}/files/${request.id}.png`;
  }

  /** What the request asked for, as the made image's size. */
  private sizeOf(request: FakeRequest): { width: number; height: number } {
    if (this.options.imageSize) return this.options.imageSize;
    const input = request.input;
    const imageSize = input.image_size as { width?: number; height?: number } | undefined;
    if (imageSize?.width && imageSize.height) return { width: imageSize.width, height: imageSize.height };
    if (typeof input.width === 'number' && typeof input.height === 'number') return { width: input.width, height: input.height };
    const [w, h] = String(input.aspect_ratio ?? '1:1').split(':').map(Number);
    const scale = 1024 / Math.max(w, h);
    return { width: Math.round((w * scale) / 16) * 16, height: Math.round((h * scale) / 16) * 16 };
  }

  private async serveImage(path: string, res: http.ServerResponse): Promise<void> {
    const id = /^\/files\/([^/]+)\.png$/.exec(path)?.[1];
    const request = id ? this.made.get(id) : undefined;
    if (!request) return json(res, 404, { detail: 'No such file' });
    if (request.outcome === 'not-image') {
      res.writeHead(200, { 'content-type': 'image/png' }).end('<html>not an image</html>');
      return;
    }
    const size = this.sizeOf(request);
    const png = await this.png(size.width, size.height);
    res.writeHead(200, { 'content-type': 'image/png', 'content-length': String(png.length) }).end(png);
  }

  private png(width: number, height: number): Promise<Buffer> {
    const key = `${width}x${height}`;
    let png = this.pngs.get(key);
    if (!png) {
      png = sharp({ create: { width, height, channels: 3, background: { r: 40, g: 90, b: 160 } } }).png().toBuffer();
      this.pngs.set(key, png);
    }
    return png;
  }
}

function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers }).end(text);
}
