import { Inject, Injectable } from '@nestjs/common';
import type { Response } from 'express';
import { createHash } from 'node:crypto';
import { RateDecision, RateLimitService } from '../auth/rate-limit.service';

export const DASHBOARD_AUTH_LIMITS = 'kiln:dashboard-auth-limits';

/** Attempts per minute. Each attempt costs a scrypt, so every attempt counts, not only failures. */
export interface DashboardAuthLimits {
  loginPerEmail: number;
  loginPerIp: number;
  signupPerIp: number;
}

export const DEFAULT_DASHBOARD_AUTH_LIMITS: DashboardAuthLimits = { loginPerEmail: 10, loginPerIp: 30, signupPerIp: 10 };

/**
 * Brute-force and CPU protection for signup and login, counted in Redis so every api
 * replica shares the windows. The IP is Express's req.ip: behind a proxy, set TRUST_PROXY
 * (Express's `trust proxy`) so it is the client's address rather than the proxy's.
 */
@Injectable()
export class LoginThrottle {
  constructor(
    private readonly rateLimits: RateLimitService,
    @Inject(DASHBOARD_AUTH_LIMITS) private readonly limits: DashboardAuthLimits,
  ) {}

  async login(ip: string, email: string, res: Response): Promise<void> {
    // Redis holds a digest of the email, not the address itself.
    const emailKey = createHash('sha256').update(email.trim().toLowerCase()).digest('base64url');
    await this.check(res, `dash-login-ip:${ip}`, this.limits.loginPerIp);
    await this.check(res, `dash-login-email:${emailKey}`, this.limits.loginPerEmail);
  }

  async signup(ip: string, res: Response): Promise<void> {
    await this.check(res, `dash-signup-ip:${ip}`, this.limits.signupPerIp);
  }

  private check(res: Response, subject: string, perMinute: number): Promise<RateDecision> {
    return this.rateLimits.enforce(res, subject, perMinute, 'Too many attempts; retry after the Retry-After delay');
  }
}
