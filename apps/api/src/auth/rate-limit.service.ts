import { Injectable, Logger } from '@nestjs/common';
import type { Response } from 'express';
import { RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { ErrorCode, KilnError } from '@app/errors';
import { RedisService } from '@app/redis';

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Whole seconds until the window resets (at least 1). */
  resetSeconds: number;
  /** Points counted in the window, which may pass the limit (penalties are counted regardless). */
  used?: number;
}

/** What a metrics endpoint reads about the in-process fallback. */
export interface RateLimitFallbackStats {
  /** True while Redis is not answering and this process counts on its own. */
  active: boolean;
  /** Outages seen since start (each one logged once). */
  outages: number;
  /** Limiter calls answered in-process since start. */
  decisions: number;
  /** When the current outage began. */
  since: Date | null;
}

/** Per-call options object; the insurance limiter marks the calls it answered. */
interface CallOptions {
  servedInProcess?: boolean;
}

/**
 * The in-process insurance limiter rate-limiter-flexible calls when a Redis command fails
 * (down, frozen past REDIS_COMMAND_TIMEOUT_MS, or not connected: `rejectIfRedisNotReady`).
 * It marks the call's options so the service can tell an outage from an answer.
 */
class InsuranceLimiter extends RateLimiterMemory {
  consume(key: string | number, points?: number, options: CallOptions = {}): Promise<RateLimiterRes> {
    options.servedInProcess = true;
    return super.consume(key, points, options);
  }

  penalty(key: string | number, points?: number, options: CallOptions = {}): Promise<RateLimiterRes> {
    options.servedInProcess = true;
    return super.penalty(key, points, options);
  }

  get(key: string | number, options: CallOptions = {}): Promise<RateLimiterRes | null> {
    options.servedInProcess = true;
    return super.get(key, options);
  }

  delete(key: string | number, options: CallOptions = {}): Promise<boolean> {
    options.servedInProcess = true;
    return super.delete(key, options);
  }
}

/** After Redis fails a limiter call, calls skip it this long instead of each paying the command timeout. */
const REDIS_RETRY_MS = 5000;

/**
 * Fixed windows per subject (a key, a session, an address...), counted in Redis so every api
 * replica shares them. While Redis is unavailable, each process counts in memory instead (so
 * with N replicas a client may get up to N times its limit) rather than fail or stall the
 * request; the switch is logged once per outage each way and counted in `fallbackStats`.
 * Limiters are cached per limit and window because the plan's limit is operator-editable.
 */
@Injectable()
export class RateLimitService {
  private readonly logger = new Logger(RateLimitService.name);
  private readonly limiters = new Map<string, { shared: RateLimiterRedis; local: InsuranceLimiter }>();
  private readonly fallback: RateLimitFallbackStats = { active: false, outages: 0, decisions: 0, since: null };
  private redisRetryAt = 0;

  constructor(private readonly redis: RedisService) {}

  fallbackStats(): RateLimitFallbackStats {
    return { ...this.fallback };
  }

  /** Counts one request against `subject`'s window. */
  async consume(subject: string, limit: number, windowSeconds = 60): Promise<RateDecision> {
    try {
      const res = await this.call(limit, windowSeconds, (limiter, options) => limiter.consume(subject, 1, options));
      return this.decision(true, limit, res);
    } catch (rejection) {
      if (rejection instanceof RateLimiterRes) return this.decision(false, limit, rejection);
      throw rejection;
    }
  }

  /** Whether `subject` still has budget, without spending any (a failure counter checked up front). */
  async peek(subject: string, limit: number, windowSeconds = 60): Promise<RateDecision> {
    const res = await this.call(limit, windowSeconds, (limiter, options) => limiter.get(subject, options));
    if (!res) return { allowed: true, limit, remaining: limit, resetSeconds: windowSeconds, used: 0 };
    return this.decision(res.consumedPoints < limit, limit, res);
  }

  /** Counts one event (a failure) against `subject`'s window, whatever the budget left. */
  async penalize(subject: string, limit: number, windowSeconds = 60): Promise<RateDecision> {
    const res = await this.call(limit, windowSeconds, (limiter, options) => limiter.penalty(subject, 1, options));
    return this.decision(res.consumedPoints <= limit, limit, res);
  }

  /** Clears `subject`'s window. */
  async forget(subject: string, limit: number, windowSeconds = 60): Promise<void> {
    await this.call(limit, windowSeconds, (limiter, options) => limiter.delete(subject, options));
  }

  /**
   * Consumes one request, sets the RateLimit-* headers and, once the budget is spent,
   * Retry-After plus a 429 rate_limited error.
   */
  async enforce(res: Response, subject: string, limit: number, message: string, windowSeconds = 60): Promise<RateDecision> {
    const rate = await this.consume(subject, limit, windowSeconds);
    res.setHeader('RateLimit-Limit', String(rate.limit));
    res.setHeader('RateLimit-Remaining', String(rate.remaining));
    res.setHeader('RateLimit-Reset', String(rate.resetSeconds));
    if (!rate.allowed) refuse(res, rate, message);
    return rate;
  }

  /** Runs one limiter operation on Redis, or in memory while Redis is out; notes the switch. */
  private async call<T>(
    limit: number,
    windowSeconds: number,
    op: (limiter: RateLimiterAbstract, options: CallOptions) => Promise<T>,
  ): Promise<T> {
    const { shared, local } = this.limitersFor(limit, windowSeconds);
    const options: CallOptions = {};
    if (this.fallback.active && Date.now() < this.redisRetryAt) {
      this.fallback.decisions++;
      return op(local, options);
    }
    try {
      return await op(shared, options);
    } finally {
      if (options.servedInProcess) this.redisFailed();
      else this.redisAnswered();
    }
  }

  private redisFailed(): void {
    this.fallback.decisions++;
    this.redisRetryAt = Date.now() + REDIS_RETRY_MS;
    if (this.fallback.active) return;
    this.fallback.active = true;
    this.fallback.outages++;
    this.fallback.since = new Date();
    this.logger.warn(
      `Redis is not answering (connection ${this.redis.client.status}); rate limits are counted in this process until it does`,
    );
  }

  private redisAnswered(): void {
    if (!this.fallback.active) return;
    const seconds = Math.round((Date.now() - (this.fallback.since?.getTime() ?? Date.now())) / 1000);
    this.fallback.active = false;
    this.fallback.since = null;
    this.logger.warn(`Redis answers again after ${seconds} s; rate limits are shared through Redis again`);
  }

  private decision(allowed: boolean, limit: number, res: RateLimiterRes): RateDecision {
    return {
      allowed,
      limit,
      remaining: Math.max(0, limit - res.consumedPoints),
      resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
      used: res.consumedPoints,
    };
  }

  private limitersFor(points: number, duration: number): { shared: RateLimiterRedis; local: InsuranceLimiter } {
    const id = `${points}:${duration}`;
    let limiters = this.limiters.get(id);
    if (!limiters) {
      const keyPrefix = this.redis.key('rl', String(points), `${duration}s`);
      const local = new InsuranceLimiter({ keyPrefix, points, duration });
      const shared = new RateLimiterRedis({
        storeClient: this.redis.client,
        keyPrefix,
        points,
        duration,
        // Fail over at once when the connection is down rather than queue the command.
        rejectIfRedisNotReady: true,
        insuranceLimiter: local,
      });
      limiters = { shared, local };
      this.limiters.set(id, limiters);
    }
    return limiters;
  }
}

/** Retry-After and a 429 rate_limited error. */
export function refuse(res: Response, rate: RateDecision, message: string): never {
  res.setHeader('Retry-After', String(rate.resetSeconds));
  throw new KilnError(ErrorCode.RateLimited, message, { retryAfter: rate.resetSeconds, limit: rate.limit });
}
