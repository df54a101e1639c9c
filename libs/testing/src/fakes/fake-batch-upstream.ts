import type { ServerResponse } from 'node:http';
import { CapturedRequest, fakePng, FakeServer } from './fake-upstream';

/**
 * What the batch API fakes (openai-batch.fake.ts, gemini-batch.fake.ts) share: the fake
 * server (FakeServer: requests recorded, scripted answers before the fake's own routing), a
 * step that hangs once on command (`hangAt`, for timeouts and crash tests; `created` makes
 * the batch and never answers the create), result files streamed a line at a time that can
 * be held mid-way (`holdOutputAfter` / `release`), and how often each key was submitted in a
 * created batch (`submissions`).
 */
export abstract class FakeBatchUpstream<Step extends string> extends FakeServer {
  /** key (custom_id / key) -> how many created batches carried it. */
  readonly submissions = new Map<string, number>();
  /** Result-file lines written so far (across files), for the streaming tests. */
  linesWritten = 0;
  /** The next call at this step hangs for good (then the step answers normally again). */
  hangAt: Step | null = null;
  private holdAfter: number | null = null;
  private releaseHold: (() => void) | null = null;
  private readonly pngs = new Map<string, Promise<Buffer>>();

  /** The fake's own API: answers the request (after scripted answers and hangs). */
  protected abstract route(req: CapturedRequest, res: ServerResponse): Promise<void>;
  /** Which hangAt step a request is, if any. */
  protected abstract stepOf(req: CapturedRequest): Step | null;

  async stop(): Promise<void> {
    this.releaseHold?.();
    await super.stop();
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

  /**
   * Answers a create whose batch is made: counts its keys as submitted, then hangs instead
   * when `hangAt` is `created` (the window a crash between create and record leaves).
   */
  protected created(res: ServerResponse, keys: string[], answer: unknown): void {
    for (const key of keys) this.submissions.set(key, (this.submissions.get(key) ?? 0) + 1);
    if (this.hangIf('created', res)) return;
    sendJson(res, 200, answer);
  }

  /** Hangs this answer for good when the step is the one asked for (once). */
  protected hangIf(step: Step | 'created', res: ServerResponse): boolean {
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
    const lines = content
      .toString('utf8')
      .split('\n')
      .filter((l) => l.length > 0);
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

  protected async unscripted(req: CapturedRequest, res: ServerResponse): Promise<void> {
    const step = this.stepOf(req);
    if (step !== null && this.hangIf(step, res)) return;
    try {
      await this.route(req, res);
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

/** When a batch created now ends by itself: `completeAfterMs` later (default 0), never for null. */
export function endsAt(completeAfterMs: number | null | undefined): number | null {
  const after = completeAfterMs === undefined ? 0 : completeAfterMs;
  return after === null ? null : Date.now() + after;
}

/** A JSONL file's lines, parsed (blank lines skipped). */
export function jsonLines<T>(content: Buffer): T[] {
  return content
    .toString('utf8')
    .split('\n')
    .filter((l) => l.trim().length > 0)
    .map((l) => JSON.parse(l) as T);
}
