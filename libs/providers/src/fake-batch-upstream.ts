import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fakePng } from './fake-upstream';
import type { CapturedRequest, FakeAnswer, FakeUpstream } from './provider-type';

type Scripted = FakeAnswer | ((req: CapturedRequest) => FakeAnswer | Promise<FakeAnswer>);

/**
 * What the batch API fakes (openai-batch.fake.ts, gemini-batch.fake.ts) share: a server on
 * 127.0.0.1 recording each request, scripted answers (`answerNext`) before the fake's own
 * routing, a step that hangs once on command (`hangAt`, for timeouts and crash tests), result
 * files streamed a line at a time that can be held mid-way (`holdOutputAfter` / `release`),
 * and how often each key was submitted in a created batch (`submissions`).
 */
export abstract class FakeBatchUpstream<Step extends string> implements FakeUpstream {
  readonly requests: CapturedRequest[] = [];
  /** key (custom_id / key) -> how many created batches carried it. */
  readonly submissions = new Map<string, number>();
  /** Result-file lines written so far (across files), for the streaming tests. */
  linesWritten = 0;
  /** The next call at this step hangs for good (then the step answers normally again). */
  hangAt: Step | null = null;
  protected readonly hanging = new Set<ServerResponse>();
  private readonly queued: Scripted[] = [];
  private readonly server: Server;
  protected origin = '';
  private holdAfter: number | null = null;
  private releaseHold: (() => void) | null = null;
  private readonly pngs = new Map<string, Promise<Buffer>>();

  constructor(private readonly pathPrefix: string) {
    this.server = createServer((req, res) => void this.handle(req, res));
  }

  /** The fake's own API: answers the request (after scripted answers and hangs). */
  protected abstract route(req: CapturedRequest, res: ServerResponse): Promise<void>;
  /** Which hangAt step a request is, if any. */
  protected abstract stepOf(req: CapturedRequest): Step | null;

  get baseUrl(): string {
    return `${this.origin}${this.pathPrefix}`;
  }

  get originUrl(): string {
    return this.origin;
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.baseUrl;
  }

  async stop(): Promise<void> {
    this.releaseHold?.();
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }

  answerNext(...answers: Scripted[]): void {
    this.queued.push(...answers);
  }

  /** Result files stop after this many lines (counted per file) until `release()`. */
  holdOutputAfter(lines: number): void {
    this.holdAfter = lines;
  }

  release(): void {
    this.holdAfter = null;
    this.releaseHold?.();
    this.releaseHold = null;
  }

  protected countSubmitted(keys: string[]): void {
    for (const key of keys) this.submissions.set(key, (this.submissions.get(key) ?? 0) + 1);
  }

  /** Hangs this answer for good when the step is the one asked for (once). */
  protected hangIf(step: Step, res: ServerResponse): boolean {
    if (this.hangAt !== step) return false;
    this.hangAt = null;
    this.hanging.add(res);
    return true;
  }

  /** A real PNG for an asked "WxH" (1024x1024 when not one), divided by `scale`, cached by size. */
  protected png(size: { width: number; height: number }, scale: number): Promise<Buffer> {
    const w = Math.max(1, Math.round(size.width / scale));
    const h = Math.max(1, Math.round(size.height / scale));
    const key = `${w}x${h}`;
    if (!this.pngs.has(key)) this.pngs.set(key, fakePng(w, h));
    return this.pngs.get(key)!;
  }

  /** Writes a result file a line at a time, honouring the hold and the reader's pace. */
  protected async streamFile(content: Buffer, res: ServerResponse): Promise<void> {
    res.writeHead(200, { 'content-type': 'application/octet-stream' });
    const lines = content.toString('utf8').split('\n').filter((l) => l.length > 0);
    let sent = 0;
    for (const line of lines) {
      if (this.holdAfter !== null && sent >= this.holdAfter) {
        await new Promise<void>((resolve) => (this.releaseHold = resolve));
      }
      if (!res.write(`${line}\n`)) await new Promise((resolve) => res.once('drain', resolve));
      sent++;
      this.linesWritten++;
      if (res.destroyed) return;
    }
    res.end();
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const captured: CapturedRequest = { method: req.method ?? '', path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks), receivedAt: Date.now() };
    this.requests.push(captured);
    const next = this.queued.shift();
    if (next !== undefined) {
      const answer = typeof next === 'function' ? await next(captured) : next;
      if (answer === 'hang') {
        this.hanging.add(res);
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json', ...answer.headers }).end(answer.body);
      return;
    }
    const step = this.stepOf(captured);
    if (step !== null && this.hangIf(step, res)) return;
    try {
      await this.route(captured, res);
    } catch (err) {
      if (!res.headersSent) sendJson(res, 500, { error: { message: String(err) } });
      else res.destroy();
    }
  }
}

/** A fixed shuffle (no Math.random in fakes: runs are repeatable), never the input order for 2+ lines. */
export function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  let s = 2463534242;
  for (let i = out.length - 1; i > 0; i--) {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    const j = (s >>> 0) % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  if (out.length > 1 && out.every((l, i) => l === items[i])) out.reverse();
  return out;
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

/** "WxH" -> pixel size; 1024x1024 when it is not one. */
export function askedSize(size: unknown): { width: number; height: number } {
  const m = /^(\d+)x(\d+)$/.exec(typeof size === 'string' ? size : '');
  return m ? { width: Number(m[1]), height: Number(m[2]) } : { width: 1024, height: 1024 };
}
