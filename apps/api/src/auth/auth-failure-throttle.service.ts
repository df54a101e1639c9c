import { Inject, Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';
import { clientIp } from './client-ip';
import { RateLimitService, refuse } from './rate-limit.service';

/** Refusals of a presented credential; a missing one costs nothing to check and is not counted. */
const CREDENTIAL_REFUSALS = new Set<ErrorCode>([
  ErrorCode.InvalidApiKey,
  ErrorCode.KeyRevoked,
  ErrorCode.InvalidCredentials,
  ErrorCode.Unauthorized,
]);

/** Addresses remembered as blocked at once; past this, the oldest block is dropped first. */
const MAX_BLOCKED_ADDRESSES = 10_000;

/**
 * Throttles guessing: an address whose API keys, admin tokens or session tokens failed
 * AUTH_FAILURES_PER_IP_PER_MINUTE times this minute gets 429 rate_limited, before its next
 * credential is even looked at, until the window ends. One budget for all three kinds.
 *
 * The failures are counted in Redis (shared by every api replica), but only when one
 * happens: the replica that counts an address to its limit blocks it in memory for the rest
 * of the window, so a request with a good credential costs no Redis call here (every request
 * passes this check; few fail). Another replica blocks that address at its own next failure,
 * which its count in Redis already puts over the limit: N replicas let through at most N-1
 * extra guesses a window.
 */
@Injectable()
export class AuthFailureThrottle {
  /** Address -> when its block ends (ms); insertion order is expiry order within a window. */
  private readonly blocked = new Map<string, { until: number; limit: number }>();

  constructor(
    private readonly rateLimits: RateLimitService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /** Runs `authenticate` unless the address is throttled; a refused credential counts against it. */
  async guard<T>(req: Request, res: Response, authenticate: () => Promise<T> | T): Promise<T> {
    const subject = `auth-fail-ip:${clientIp(req)}`;
    const limit = this.config.auth.failuresPerIpPerMinute;
    const block = this.blocked.get(subject);
    if (block) {
      const left = block.until - Date.now();
      if (left > 0) refuse(res, { allowed: false, limit: block.limit, remaining: 0, resetSeconds: Math.ceil(left / 1000) }, TOO_MANY);
      this.blocked.delete(subject);
    }
    try {
      return await authenticate();
    } catch (err) {
      if (err instanceof KilnError && CREDENTIAL_REFUSALS.has(err.code) && hasCredential(req)) {
        const rate = await this.rateLimits.penalize(subject, limit);
        if (rate.remaining === 0) this.block(subject, rate.limit, rate.resetSeconds);
      }
      throw err;
    }
  }

  private block(subject: string, limit: number, resetSeconds: number): void {
    this.blocked.delete(subject);
    if (this.blocked.size >= MAX_BLOCKED_ADDRESSES) {
      const now = Date.now();
      for (const [s, b] of this.blocked) if (b.until <= now) this.blocked.delete(s);
      if (this.blocked.size >= MAX_BLOCKED_ADDRESSES) this.blocked.delete(this.blocked.keys().next().value!);
    }
    this.blocked.set(subject, { until: Date.now() + resetSeconds * 1000, limit });
  }
}

const TOO_MANY = 'Too many failed authentication attempts from this address; retry after the Retry-After delay';

// The web app's session cookie is a credential too: guessing tokens through it counts alike.
const hasCredential = (req: Request) =>
  /^Bearer\s+\S/i.test(req.headers.authorization ?? '') || /(^|;)\s*kiln_session=[^;\s]/.test(req.headers.cookie ?? '');
