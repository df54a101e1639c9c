import type { CapturedRequest, FakeAnswer } from '../provider-type';
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
 */
export class RateLimitedOpenAiFake extends OpenAiFakeUpstream {
  accepted = 0;
  refused = 0;
  maxInFlight = 0;
  private inFlight = 0;
  private windowStart = 0;
  private usedInWindow = 0;
  private png: Buffer | null = null;

  constructor(public limits: StrictLimits) {
    super();
  }

  protected async defaultAnswer(req: CapturedRequest): Promise<FakeAnswer> {
    if (req.method !== 'POST' || !/^\/v1\/images\/(generations|edits)$/.test(req.path)) return json(404, { error: { message: 'not found' } });
    const now = Date.now();
    const windowStart = now - (now % 1000);
    if (windowStart !== this.windowStart) {
      this.windowStart = windowStart;
      this.usedInWindow = 0;
    }
    const overRate = this.usedInWindow >= this.limits.perSecond;
    const overConcurrency = this.inFlight >= this.limits.maxConcurrent;
    if (overRate || overConcurrency) {
      this.refused++;
      return json(429, { error: { message: 'Rate limit reached for requests', type: 'requests', code: 'rate_limit_exceeded' } }, this.headers(now));
    }
    this.usedInWindow++;
    this.accepted++;
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    const headers = this.headers(now);
    try {
      await new Promise((resolve) => setTimeout(resolve, this.limits.latencyMs));
      this.png ??= await fakePng(64, 64);
      return json(200, { created: Math.floor(now / 1000), data: [{ b64_json: this.png.toString('base64') }] }, headers);
    } finally {
      this.inFlight--;
    }
  }

  /** Share of the calls refused, 0..1. */
  get refusedShare(): number {
    const calls = this.accepted + this.refused;
    return calls === 0 ? 0 : this.refused / calls;
  }

  private headers(now: number): Record<string, string> {
    if (!this.limits.openAiHeaders) return {};
    return {
      'x-ratelimit-limit-requests': String(this.limits.perSecond),
      'x-ratelimit-remaining-requests': String(Math.max(0, this.limits.perSecond - this.usedInWindow)),
      'x-ratelimit-reset-requests': `${this.windowStart + 1000 - now}ms`,
    };
  }
}
