import { Inject, Injectable } from '@nestjs/common';
import type { Response } from 'express';
import { createHash } from 'node:crypto';
import { ErrorCode, KilnError } from '@app/errors';
import { RateDecision, RateLimitService, refuse } from '../auth/rate-limit.service';

export const DASHBOARD_AUTH_LIMITS = 'kiln:dashboard-auth-limits';

export interface DashboardAuthLimits {
  /** Login attempts per minute from one address, failed or not: each one costs a scrypt. */
  loginPerIp: number;
  /** Failed logins per minute on one email from one address. */
  loginFailuresPerEmailAndIp: number;
  /**
   * Failed logins per hour on one email from all addresses together: the backstop against a
   * guess spread over many addresses. Far above the per-address limit, so one stranger
   * cannot lock the holder out.
   */
  loginFailuresPerEmailPerHour: number;
  /** Signups per minute from one address. */
  signupPerIp: number;
}

export const DEFAULT_DASHBOARD_AUTH_LIMITS: DashboardAuthLimits = {
  loginPerIp: 30,
  loginFailuresPerEmailAndIp: 10,
  loginFailuresPerEmailPerHour: 100,
  signupPerIp: 10,
};

const HOUR_SECONDS = 3600;
const TOO_MANY = 'Too many attempts; retry after the Retry-After delay';

/**
 * Brute-force and CPU protection for signup and login, counted in Redis so every api
 * replica shares the windows (in memory per process while Redis is out). Only failed logins
 * count toward the email's limits, and a successful login clears its address's count, so
 * a stranger guessing from elsewhere never stops the holder from signing in (short of the
 * hourly backstop). The IP is Express's req.ip (see clientIp).
 */
@Injectable()
export class LoginThrottle {
  constructor(
    private readonly rateLimits: RateLimitService,
    @Inject(DASHBOARD_AUTH_LIMITS) private readonly limits: DashboardAuthLimits,
  ) {}

  /** Runs `attempt` (the password check) unless a limit is spent; counts it if it fails. */
  async login<T>(ip: string, email: string, res: Response, attempt: () => Promise<T>): Promise<T> {
    // Redis holds a digest of the email, not the address itself.
    const emailKey = createHash('sha256').update(email.trim().toLowerCase()).digest('base64url');
    const perEmailAndIp = `dash-login-fail:${emailKey}:${ip}`;
    const perEmail = `dash-login-fail-email:${emailKey}`;
    const { loginPerIp, loginFailuresPerEmailAndIp: local, loginFailuresPerEmailPerHour: global } = this.limits;

    await this.rateLimits.enforce(res, `dash-login-ip:${ip}`, loginPerIp, TOO_MANY);
    const [here, everywhere] = await Promise.all([
      this.rateLimits.peek(perEmailAndIp, local),
      this.rateLimits.peek(perEmail, global, HOUR_SECONDS),
    ]);
    for (const rate of [here, everywhere]) if (!rate.allowed) refuse(res, rate, TOO_MANY);

    try {
      const result = await attempt();
      await this.rateLimits.forget(perEmailAndIp, local);
      return result;
    } catch (err) {
      if (err instanceof KilnError && err.code === ErrorCode.InvalidCredentials) {
        await Promise.all([this.rateLimits.penalize(perEmailAndIp, local), this.rateLimits.penalize(perEmail, global, HOUR_SECONDS)]);
      }
      throw err;
    }
  }

  async signup(ip: string, res: Response): Promise<RateDecision> {
    return this.rateLimits.enforce(res, `dash-signup-ip:${ip}`, this.limits.signupPerIp, TOO_MANY);
  }
}
