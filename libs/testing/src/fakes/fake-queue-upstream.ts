import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import { parseAspectRatio } from '@app/geometry';
import type { CapturedRequest, FakeAnswer, FakeUpstream } from './fake-upstream';

export interface FakeQueueOptions {
  /** How long a request stays queued before it is made (default 300 ms). */
  queueMs?: number;
  /** The made image's size; default: what the request asked (or 1024 on the long side for a ratio). */
  imageSize?: { width: number; height: number };
  /** Where `[private-url]` points: an address the generator must refuse. */
  privateImageBase?: string;
  /**
   * Requests stay in the queue, never run, until cancelled (as on a busy upstream), except
   * those whose prompt says `[running]`: they start at once and are made after queueMs.
   */
  holdInQueue?: boolean;
  /** Every request accepted at the submit fails upstream once run (an upstream whose runs all fail: failover tests). */
  failAll?: boolean;
  /** The submit is taken (counted, queued) at once and its answer held this long (a slow upstream; a crash meanwhile). */
  holdSubmitAnswerMs?: number;
}

/** Where a request stands, as a cancel finds it. */
export type FakeRequestStage = 'queued' | 'running' | 'done' | 'cancelled';

/** One request the fake saw. */
export interface FakeSeen {
  method: string;
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown> | null;
  at: number;
}

/** A request the fake made (or is making), as a dialect answers about it. */
export interface FakeQueuedRequest {
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
  /** Taken out of the queue by a cancel (never made). */
  cancelled: boolean;
  /** Started at submit (`[running]`): a cancel finds it running. */
  startedAtSubmit: boolean;
  /** The path it was submitted to (its model, in the dialect's form). */
  submitPath: string;
}

/** An answer as a dialect writes it: a JSON body with its status. */
export interface QueueAnswer {
  status: number;
  body: unknown;
}

/**
 * What one queue type's upstream says its own way, the rest of the fake being shared
 * (FakeQueueUpstream): its paths, its submit answer, its refusals and its poll answers. Each
 * queue type's fake folder holds its dialect (e.g. fal/fal.fake.ts).
 */
export interface QueueDialect {
  /** The route's baseUrl for a fake at `root` (its origin). */
  baseUrl(root: string): string;
  /** Whether a POST to this path submits a request. */
  isSubmit(path: string): boolean;
  /** The request id a GET asks about; null when the path is not a status check or result read. */
  requestIdOf(url: URL): string | null;
  /** Whether a GET about a request is a status check (a poll) rather than a read of its result. */
  isStatusCheck(url: URL): boolean;
  /** The request's input (prompt, seed, size fields) in a submit's body. */
  inputOf(body: Record<string, unknown> | null): Record<string, unknown>;
  /** The answer to an accepted submit; `submitPath` is the path it was posted to. */
  accepted(id: string, root: string, submitPath: string, input: Record<string, unknown>): QueueAnswer;
  /** The answer to a submit refused for its content. */
  refusedAtSubmit(): QueueAnswer;
  /** The answer to a GET about a request; `ready` once it is made, `size` the made image's size. */
  answer(
    request: FakeQueuedRequest,
    url: URL,
    made: { ready: boolean; stage: FakeRequestStage; imageUrl: string; size: { width: number; height: number } },
  ): QueueAnswer;
  /** The request id a cancel (`method` to this path) names; null when the request is no cancel. Absent: the upstream has no cancel. */
  cancelIdOf?(method: string, url: URL): string | null;
  /** The answer to a cancel of a request at `stage` (before the cancel); `queued` ones are then taken out of the queue. */
  cancelAnswer?(request: FakeQueuedRequest, stage: FakeRequestStage, imageUrl: string): QueueAnswer;
  /** The upstream's listing of recent requests, when it has one and `url` asks for it (newest first); null otherwise. */
  list?(
    url: URL,
    newestFirst: readonly FakeQueuedRequest[],
    root: string,
    stageOf: (r: FakeQueuedRequest) => FakeRequestStage,
  ): QueueAnswer | null;
}

/**
 * A local stand-in for a queue upstream (its dialect says which) on 127.0.0.1, for
 * tests and the bench. The prompt picks the behaviour: [refuse] the request is refused for
 * its content once made, [refuse-submit] at the submit, [nsfw] the safety checker's
 * verdict (in a dialect that has one), [fail-once] the first request for the prompt fails upstream, [429-once] /
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
  /** Cancels asked, by request id, and how each request stood then. */
  readonly cancels: { id: string; stage: FakeRequestStage }[] = [];
  root = '';
  private readonly server: http.Server;
  private readonly made = new Map<string, FakeQueuedRequest>();
  private readonly firstSeen = new Set<string>();
  private readonly pngs = new Map<string, Promise<Buffer>>();
  private next = 0;

  constructor(
    private readonly dialect: QueueDialect,
    private readonly options: FakeQueueOptions = {},
  ) {
    this.server = http.createServer((req, res) => void this.handle(req, res).catch(() => res.destroy()));
    this.server.keepAliveTimeout = 5000;
  }

  /** The route's baseUrl for this fake. */
  get baseUrl(): string {
    return this.dialect.baseUrl(this.root);
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

  /** The requests accepted for a prompt, in submit order. */
  madeFor(prompt: string): FakeQueuedRequest[] {
    return [...this.made.values()].filter((r) => r.prompt === prompt);
  }

  /** Requests whose path the test names (submits, polls). */
  seenAt(pattern: RegExp): FakeSeen[] {
    return this.seen.filter((s) => pattern.test(s.path));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: Record<string, unknown> | null;
    try {
      body = text ? (JSON.parse(text) as Record<string, unknown>) : null;
    } catch {
      body = null;
    }
    const url = new URL(req.url ?? '/', this.root);
    if (this.recordBodies) {
      this.seen.push({ method: req.method ?? '', path: `${url.pathname}${url.search}`, headers: req.headers, body, at: Date.now() });
      this.requests.push({
        method: req.method ?? '',
        path: `${url.pathname}${url.search}`,
        headers: req.headers,
        body: Buffer.concat(chunks),
        receivedAt: Date.now(),
      });
    }
    const scripted = this.scripted.shift();
    if (scripted) {
      const answer = typeof scripted === 'function' ? await scripted(this.requests[this.requests.length - 1]) : scripted;
      if (answer === 'hang') return;
      res.writeHead(answer.status, answer.headers ?? {}).end(answer.body);
      return;
    }

    if (req.method === 'GET' && url.pathname.startsWith('/files/')) return this.serveImage(url.pathname, res);
    const cancelId = this.dialect.cancelIdOf?.(req.method ?? '', url) ?? null;
    if (cancelId !== null) return this.cancel(cancelId, res);
    if (req.method === 'POST' && this.dialect.isSubmit(url.pathname)) return this.submit(body, url.pathname, res);
    if (req.method === 'GET') {
      const listed = this.dialect.list?.(url, [...this.made.values()].reverse(), this.root, (r) => this.stageOf(r)) ?? null;
      if (listed) return send(res, listed);
      const id = this.dialect.requestIdOf(url);
      if (id !== null) return this.poll(id, url, res);
    }
    json(res, 404, { detail: 'Not found' });
  }

  private async submit(body: Record<string, unknown> | null, submitPath: string, res: http.ServerResponse): Promise<void> {
    const input = this.dialect.inputOf(body);
    const prompt = typeof input.prompt === 'string' ? input.prompt : '';
    const first = !this.firstSeen.has(prompt);
    this.firstSeen.add(prompt);
    if (first && prompt.includes('[hang-once]')) return; // never answers: the client's timeout
    if (first && prompt.includes('[429-once]')) return json(res, 429, { detail: 'Rate limited' }, { 'retry-after': '1' });
    if (first && prompt.includes('[500-once]')) return json(res, 500, { detail: 'Internal error' });
    if (prompt.includes('[refuse-submit]')) return send(res, this.dialect.refusedAtSubmit());

    this.submits++;
    this.submitsByPrompt.set(prompt, (this.submitsByPrompt.get(prompt) ?? 0) + 1);
    const id = `req-${++this.next}-${Math.random().toString(36).slice(2, 10)}`;
    const failedBefore = (this.submitsByPrompt.get(prompt) ?? 0) > 1;
    const outcome: FakeQueuedRequest['outcome'] = prompt.includes('[refuse]')
      ? 'refused'
      : prompt.includes('[nsfw]')
        ? 'nsfw'
        : this.options.failAll || (prompt.includes('[fail-once]') && !failedBefore)
          ? 'failed'
          : prompt.includes('[not-image]')
            ? 'not-image'
            : prompt.includes('[private-url]')
              ? 'private-url'
              : prompt.includes('[no-image]')
                ? 'no-image'
                : 'ok';
    const now = Date.now();
    const startedAtSubmit = prompt.includes('[running]');
    this.made.set(id, {
      id,
      prompt,
      input,
      cancelled: false,
      startedAtSubmit,
      submitPath,
      readyAt: this.options.holdInQueue && !startedAtSubmit ? Infinity : now + (this.options.queueMs ?? 300),
      polls: 0,
      outcome,
      submittedAt: now,
      lastPollAt: 0,
      minGapMs: Infinity,
    });
    const answer = this.dialect.accepted(id, this.root, submitPath, input);
    if (this.options.holdSubmitAnswerMs) await new Promise((resolve) => setTimeout(resolve, this.options.holdSubmitAnswerMs));
    if (!res.destroyed) send(res, answer);
  }

  private async poll(id: string, url: URL, res: http.ServerResponse): Promise<void> {
    this.polls++;
    const request = this.made.get(id);
    if (!request) return json(res, 404, { detail: 'Request not found' });
    const now = Date.now();
    // Result reads (a dialect's GET of the finished request) are not polls: only status checks count.
    if (this.dialect.isStatusCheck(url)) {
      if (request.lastPollAt > 0) request.minGapMs = Math.min(request.minGapMs, now - request.lastPollAt);
      request.lastPollAt = now;
      request.polls++;
    }
    if (request.prompt.includes('[poll-500]') && request.polls <= 2) return json(res, 500, { detail: 'Poll failed' });
    const stage = this.stageOf(request);
    return send(
      res,
      this.dialect.answer(request, url, { ready: stage === 'done', stage, imageUrl: this.imageUrlOf(request), size: this.sizeOf(request) }),
    );
  }

  /** Where a request stands: held in the queue, started (polled more than once, or `[running]`), made, or cancelled. */
  stageOf(request: FakeQueuedRequest): FakeRequestStage {
    if (request.cancelled) return 'cancelled';
    if (Date.now() >= request.readyAt) return 'done';
    if (request.startedAtSubmit) return 'running';
    if (this.options.holdInQueue) return 'queued';
    return request.polls > 1 ? 'running' : 'queued';
  }

  /** Stages of the requests the fake took, by prompt: what a test checks the cancels against. */
  stages(): Map<string, FakeRequestStage> {
    return new Map([...this.made.values()].map((r) => [r.id, this.stageOf(r)]));
  }

  private cancel(id: string, res: http.ServerResponse): void {
    const request = this.made.get(id);
    if (!request) return json(res, 404, { status: 'NOT_FOUND', detail: 'Request not found' });
    const stage = this.stageOf(request);
    this.cancels.push({ id, stage });
    const answer = this.dialect.cancelAnswer!(request, stage, this.imageUrlOf(request));
    if (stage === 'queued') request.cancelled = true;
    return send(res, answer);
  }

  private imageUrlOf(request: FakeQueuedRequest): string {
    if (request.outcome === 'private-url') return `${this.options.privateImageBase ?? 'http://10.0.0.1'}/files/${request.id}.png`;
    return `${this.root}/files/${request.id}.png`;
  }

  /** What the request asked for, as the made image's size. */
  private sizeOf(request: FakeQueuedRequest): { width: number; height: number } {
    if (this.options.imageSize) return this.options.imageSize;
    const input = request.input;
    const imageSize = input.image_size as { width?: number; height?: number } | undefined;
    if (imageSize?.width && imageSize.height) return { width: imageSize.width, height: imageSize.height };
    if (typeof input.width === 'number' && typeof input.height === 'number') return { width: input.width, height: input.height };
    const { w, h } = parseAspectRatio(typeof input.aspect_ratio === 'string' ? input.aspect_ratio : '1:1') ?? { w: 1, h: 1 };
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
      png = sharp({ create: { width, height, channels: 3, background: { r: 40, g: 90, b: 160 } } })
        .png()
        .toBuffer();
      this.pngs.set(key, png);
    }
    return png;
  }
}

function send(res: http.ServerResponse, answer: QueueAnswer): void {
  json(res, answer.status, answer.body);
}

function json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)), ...headers }).end(text);
}
