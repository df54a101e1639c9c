import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import sharp from 'sharp';
import type { CapturedRequest, FakeAnswer, FakeUpstream } from './provider-type';

type Scripted = FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>);

/**
 * The plumbing every type's fake shares: an HTTP server on 127.0.0.1 that records each
 * request and answers from a queue of scripted answers, else with the type's default
 * (a success). Test code only; it is loaded by the registry's `testing.fake` on demand.
 */
export abstract class FakeHttpUpstream implements FakeUpstream {
  readonly requests: CapturedRequest[] = [];
  private readonly queued: Scripted[] = [];
  private readonly hanging = new Set<ServerResponse>();
  private readonly server: Server;
  private origin = '';

  constructor(private readonly pathPrefix = '') {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /** The answer when nothing is queued: the upstream's success for this request. */
  protected abstract defaultAnswer(req: CapturedRequest): Promise<FakeAnswer> | FakeAnswer;

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
    const answer = next === undefined ? await this.defaultAnswer(captured) : typeof next === 'function' ? await next(captured) : next;
    if (answer === 'hang') {
      this.hanging.add(res);
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(answer.body);
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
