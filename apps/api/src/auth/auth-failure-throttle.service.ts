import { Inject, Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';
import { clientIp } from './client-ip';
import { RateLimitService, refuse } from './rate-limit.service';

/** Refusals of a presented credential; a missing one costs nothing to check and is not counted. */
const CREDENTIAL_REFUSALS = new Set<ErrorCode>([ErrorCode.InvalidApiKey, ErrorCode.KeyRevoked, ErrorCode.InvalidCredentials, ErrorCode.Unauthorized]);

/**
 * Throttles guessing: an address whose API keys, admin tokens or session tokens failed
 * AUTH_FAILURES_PER_IP_PER_MINUTE times this minute gets 429 rate_limited, before its next
 * credential is even looked at, until the window ends. One budget for all three kinds.
 */
@Injectable()
export class AuthFailureThrottle {
  constructor(
    private readonly rateLimits: RateLimitService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  /** Runs `authenticate` unless the address is throttled; a refused credential counts against it. */
  async guard<T>(req: Request, res: Response, authenticate: () => Promise<T> | T): Promise<T> {
    const subject = `auth-fail-ip:${clientIp(req)}`;
    const limit = this.config.auth.failuresPerIpPerMinute;
    const rate = await this.rateLimits.peek(subject, limit);
    if (!rate.allowed) refuse(res, rate, 'Too many failed authentication attempts from this address; retry after the Retry-After delay');
    try {
      return await authenticate();
    } catch (err) {
      if (err instanceof KilnError && CREDENTIAL_REFUSALS.has(err.code) && hasCredential(req)) {
        await this.rateLimits.penalize(subject, limit);
      }
      throw err;
    }
  }
}

const hasCredential = (req: Request) => /^Bearer\s+\S/i.test(req.headers.authorization ?? '');
