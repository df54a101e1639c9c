import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';

/** What a fake saw: enough to assert method, path, auth header and body. */
export interface CapturedRequest {
  method: string;
  /** Path and query, as sent. */
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
  /** Date.now() when the request had fully arrived. */
  receivedAt: number;
}

/** How a fake answers one request; `hang` never answers (for timeouts). */
export type FakeAnswer = { status: number; headers?: Record<string, string>; body: string | Buffer } | 'hang';

/**
 * A type's test double on 127.0.0.1: it speaks the upstream's protocol well enough for the
 * type's provider and the e2e tests. By default each request gets a success with a real
 * image of the asked size; `answerNext` queues other answers (errors, refusals, non-images).
 */
export interface FakeUpstream {
  /** The route baseUrl pointing at the fake (valid after start). */
  readonly baseUrl: string;
  readonly requests: CapturedRequest[];
  start(): Promise<string>;
  stop(): Promise<void>;
  /** The next requests get these answers, in order; then the default again. */
  answerNext(...answers: (FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>))[]): void;
}

export type Scripted = FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>);

/**
 * The server every HTTP fake runs (FakeHttpUpstream below, the batch fakes'
 * FakeBatchUpstream): on 127.0.0.1, recording each request, answering from a queue of
 * scripted answers first (`answerNext`, 'hang' holds the answer for good) and otherwise as
 * the fake's `unscripted` says. Test code only.
 */
/**
 * An outage of a whole fake upstream (failover tests): every request answered 503 (`down`),
 * held for good (`hang`), or its connection reset (`reset`); null: up. A function decides per
 * request (dying mid-run, flapping: see `flapping`).
 */
export type Outage = 'down' | 'hang' | 'reset' | null;

/** Down `downMs`, then up `upMs`, and so on, from now. */
export function flapping(downMs: number, upMs: number): () => Outage {
  const start = Date.now();
  return () => ((Date.now() - start) % (downMs + upMs) < downMs ? 'down' : null);
}

export abstract class FakeServer implements FakeUpstream {
  readonly requests: CapturedRequest[] = [];
  /** The upstream's outage (before any scripted answer); null: up. */
  outage: Outage | ((req: CapturedRequest) => Outage) = null;
  /** How long every answer waits (a slow upstream). */
  latencyMs = 0;
  protected readonly hanging = new Set<ServerResponse>();
  private readonly queued: Scripted[] = [];
  private readonly server: Server;
  private origin = '';

  constructor(private readonly pathPrefix = '') {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /** Answers a request no scripted answer was queued for. */
  protected abstract unscripted(req: CapturedRequest, res: ServerResponse): Promise<void>;

  get baseUrl(): string {
    return `${this.origin}${this.pathPrefix}`;
  }

  /** The server's own origin (http://127.0.0.1:port), for result URLs it serves itself. */
  get originUrl(): string {
    return this.origin;
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  answerNext(...answers: Scripted[]): void {
    this.queued.push(...answers);
  }

  /** Writes an answer, or holds the response for good for 'hang'. */
  protected reply(res: ServerResponse, answer: FakeAnswer): void {
    if (answer === 'hang') {
      this.hanging.add(res);
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(answer.body);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const captured: CapturedRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      body: Buffer.concat(chunks),
      receivedAt: Date.now(),
    };
    this.requests.push(captured);
    if (this.latencyMs > 0) await new Promise((resolve) => setTimeout(resolve, this.latencyMs));
    const outage = typeof this.outage === 'function' ? this.outage(captured) : this.outage;
    if (outage === 'reset') return void req.socket.destroy();
    if (outage === 'hang') return this.reply(res, 'hang');
    if (outage === 'down') return this.reply(res, { status: 503, body: JSON.stringify({ error: { message: 'Service Unavailable' } }) });
    const next = this.queued.shift();
    if (next === undefined) return this.unscripted(captured, res);
    this.reply(res, typeof next === 'function' ? await next(captured) : next);
  }
}

/**
 * The plumbing every type's fake shares: an HTTP server on 127.0.0.1 that records each
 * request and answers from a queue of scripted answers, else with the type's default
 * (a success). Test code only.
 */
export abstract class FakeHttpUpstream extends FakeServer {
  /** The answer when nothing is queued: the upstream's success for this request. */
  protected abstract defaultAnswer(req: CapturedRequest): Promise<FakeAnswer> | FakeAnswer;

  protected async unscripted(req: CapturedRequest, res: ServerResponse): Promise<void> {
    this.reply(res, await this.defaultAnswer(req));
  }
}

/** A real PNG of the given size, as upstreams answer. */
export function fakePng(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: '#3366aa' } })
    .png()
    .toBuffer();
}

/** JSON answer helper. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): FakeAnswer {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) };
}
