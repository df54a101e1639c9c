import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import type { CapturedRequest, FakeAnswer, FakeUpstream } from './provider-type';

export type Scripted = FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>);

/**
 * The server every HTTP fake runs (FakeHttpUpstream below, the batch fakes'
 * FakeBatchUpstream): on 127.0.0.1, recording each request, answering from a queue of
 * scripted answers first (`answerNext`, 'hang' holds the answer for good) and otherwise as
 * the fake's `unscripted` says. Test code only.
 */
export abstract class FakeServer implements FakeUpstream {
  readonly requests: CapturedRequest[] = [];
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
    const next = this.queued.shift();
    if (next === undefined) return this.unscripted(captured, res);
    this.reply(res, typeof next === 'function' ? await next(captured) : next);
  }
}

/**
 * The plumbing every type's fake shares: an HTTP server on 127.0.0.1 that records each
 * request and answers from a queue of scripted answers, else with the type's default
 * (a success). Test code only; it is loaded by the registry's `testing.fake` on demand.
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
  return sharp({ create: { width, height, channels: 3, background: '#3366aa' } }).png().toBuffer();
}

/** JSON answer helper. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): FakeAnswer {
  return { status, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) };
}
