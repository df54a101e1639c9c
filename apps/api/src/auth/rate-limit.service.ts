import { Injectable } from '@nestjs/common';
import type { Response } from 'express';
import { ErrorCode, KilnError } from '@app/errors';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { RedisService } from '@app/redis';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Whole seconds until the window resets (at least 1). */
  resetSeconds: number;
}

/**
 * Fixed one-minute windows per key, counted in Redis so every api replica shares them.
 * Limiters are cached per limit value because the plan's limit is operator-editable.
 */
@Injectable()
export class RateLimitService {
  private readonly limiters = new Map<number, RateLimiterRedis>();

  constructor(private readonly redis: RedisService) {}

  async consume(subject: string, perMinute: number): Promise<RateDecision> {
    const limiter = this.limiterFor(perMinute);
    try {
      const res = await limiter.consume(subject, 1);
      return this.decision(true, perMinute, res);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return this.decision(false, perMinute, rejection);
      throw rejection;
    }
  }

  /**
   * Consumes one request, sets the RateLimit-* headers and, once the budget is spent,
   * Retry-After plus a 429 rate_limited error.
   */
  async enforce(res: Response, subject: string, perMinute: number, message: string): Promise<RateDecision> {
    const rate = await this.consume(subject, perMinute);
    res.setHeader('RateLimit-Limit', String(rate.limit));
    res.setHeader('RateLimit-Remaining', String(rate.remaining));
    res.setHeader('RateLimit-Reset', String(rate.resetSeconds));
    if (!rate.allowed) {
      res.setHeader('Retry-After', String(rate.resetSeconds));
      throw new KilnError(ErrorCode.RateLimited, message, { retryAfter: rate.resetSeconds, limit: rate.limit });
    }
    return rate;
  }

  private decision(allowed: boolean, limit: number, res: RateLimiterRes): RateDecision {
    return {
      allowed,
      limit,
      remaining: Math.max(0, res.remainingPoints),
      resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
    };
  }

  private limiterFor(points: number): RateLimiterRedis {
    let limiter = this.limiters.get(points);
    if (!limiter) {
      limiter = new RateLimiterRedis({
        storeClient: this.redis.client,
        keyPrefix: this.redis.key('rl', String(points)),
        points,
        duration: 60,
      });
      this.limiters.set(points, limiter);
    }
    return limiter;
  }
}
