import type { CapturedRequest, FakeAnswer } from '../fake-upstream';
import { fakePng, json } from '../fake-upstream';
import { OpenAiFakeUpstream } from './openai.fake';

export interface StrictLimits {
  /** Requests accepted per one-second window (fixed windows, as OpenAI's reset counts down to). */
  perSecond: number;
  /** Requests answered at once; more are refused. */
  maxConcurrent: number;
  /** How long an accepted request takes. */
  latencyMs: number;
  /** Send OpenAI's x-ratelimit-*-requests headers on every answer; else a bare 429 (as Gemini). */
  openAiHeaders: boolean;
}

/**
 * An OpenAI images endpoint on 127.0.0.1 with a strict rate limit, for the route pacing's
 * tests and the bench's `rate-limited` scenario: beyond `perSecond` starts in the current
 * second or `maxConcurrent` in flight it answers 429 at once. It counts what it accepted and
 * refused and the most it had in flight; with headers, a request sent when the remaining count
 * told was zero is refused, so header-driven pacing must see no 429 at all.
 *
 * `sentAt` (optional) tells when the caller sent a request; the rate windows and the headers
 * then count it from that moment instead of from when this handler ran. A test that runs the
 * fake in its own process needs it: there a stall of the process (a loaded machine) lies
 * between a call's send and this handler, and would count as the call's way to the upstream
 * (in a run under load, 120-220 ms for every call of a window, past the pacer's 50 ms margin).
 */
export class RateLimitedOpenAiFake extends OpenAiFakeUpstream {
  accepted = 0;
  /** When each refusal happened (Date.now()), for the bench's timeline of 429s. */
  readonly refusedAt: number[] = [];
  maxInFlight = 0;
  private inFlight = 0;
  /** Requests counted per window (by its start): with `sentAt` they may arrive out of order. */
  private readonly used = new Map<number, number>();
  private png: Buffer | null = null;

  constructor(
    public limits: StrictLimits,
    private readonly sentAt?: (req: CapturedRequest) => number | undefined,
  ) {
    super();
  }

  protected async defaultAnswer(req: CapturedRequest): Promise<FakeAnswer> {
    if (req.method !== 'POST' || !/^\/v1\/images\/(generations|edits)$/.test(req.path))
      return json(404, { error: { message: 'not found' } });
    const now = this.sentAt?.(req) ?? Date.now();
    const windowStart = now - (now % 1000);
    for (const start of this.used.keys()) if (start < windowStart - 10_000) this.used.delete(start);
    const usedInWindow = this.used.get(windowStart) ?? 0;
    const overRate = usedInWindow >= this.limits.perSecond;
    const overConcurrency = this.inFlight >= this.limits.maxConcurrent;
    if (overRate || overConcurrency) {
      this.refusedAt.push(Date.now());
      return json(
        429,
        { error: { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' } },
        this.headers(now, usedInWindow),
      );
    }
    this.used.set(windowStart, usedInWindow + 1);
    this.accepted++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const headers = this.headers(now, usedInWindow + 1);
    try {
      await new Promise((resolve) => setTimeout(resolve, this.limits.latencyMs));
      this.png ??= await fakePng(64, 64);
      return json(200, { created: Math.floor(now / 1000), data: [{ b64_json: this.png.toString('base64') }] }, headers);
    } finally {
      this.inFlight--;
    }
  }

  get refused(): number {
    return this.refusedAt.length;
  }

  /** Share of the calls refused, 0..1. */
  get refusedShare(): number {
    const calls = this.accepted + this.refused;
    return calls === 0 ? 0 : this.refused / calls;
  }

  private headers(now: number, usedInWindow: number): Record<string, string> {
    if (!this.limits.openAiHeaders) return {};
    return {
      'x-ratelimit-limit-requests': String(this.limits.perSecond),
      'x-ratelimit-remaining-requests': String(Math.max(0, this.limits.perSecond - usedInWindow)),
      'x-ratelimit-reset-requests': `${1000 - (now % 1000)}ms`,
    };
  }
}
