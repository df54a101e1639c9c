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
   * guess spread over many addresses. Past it the email is not locked: an address that failed
   * on it this hour is refused, any other is slowed (backstopDelayMs) and may still sign in.
   */
  loginFailuresPerEmailPerHour: number;
  /** Signups per minute from one address. */
  signupPerIp: number;
  /** The wait before a login past the backstop, doubled every BACKSTOP_DOUBLING further failures. */
  backstopDelayMs?: number;
  /** The longest that wait gets. */
  backstopMaxDelayMs?: number;
}

export const DEFAULT_DASHBOARD_AUTH_LIMITS: Required<DashboardAuthLimits> = {
  loginPerIp: 30,
  loginFailuresPerEmailAndIp: 10,
  loginFailuresPerEmailPerHour: 100,
  signupPerIp: 10,
  backstopDelayMs: 1000,
  backstopMaxDelayMs: 10_000,
};

const HOUR_SECONDS = 3600;
/** Past the backstop, each further this many failures on the email double the wait. */
const BACKSTOP_DOUBLING = 10;
const TOO_MANY = 'Too many attempts; retry after the Retry-After delay';

/** The wait before a login on an email that has `failures` this hour, `limit` being the backstop. */
export function backstopDelayMs(failures: number, limit: number, baseMs: number, maxMs: number): number {
  if (failures < limit) return 0;
  return Math.min(maxMs, baseMs * 2 ** Math.min(20, Math.floor((failures - limit) / BACKSTOP_DOUBLING)));
}

/**
 * Brute-force and CPU protection for signup and login, counted in Redis so every api
 * replica shares the windows (in memory per process while Redis is out). The IP is Express's
 * req.ip (see clientIp). The model (docs/dashboard.md#sign-in-limits, after OWASP's advice
 * to throttle rather than lock accounts out):
 * - per address: 30 logins a minute, 10 failures a minute on one email; these stop a guesser;
 * - per email, the hourly backstop against a guess spread over many addresses never refuses
 *   an address that has not failed on the email: it slows it by a wait that grows with the
 *   failures, and only addresses that failed on the email this hour are refused. A stranger
 *   can slow the holder's sign-in by seconds, never stop it, and each address a distributed
 *   guesser owns buys it one slow guess an hour.
 * Only failed logins count toward the email's limits, and a success clears its address's.
 */
@Injectable()
export class LoginThrottle {
  private readonly limits: Required<DashboardAuthLimits>;

  constructor(
    private readonly rateLimits: RateLimitService,
    @Inject(DASHBOARD_AUTH_LIMITS) limits: DashboardAuthLimits,
  ) {
    this.limits = { ...DEFAULT_DASHBOARD_AUTH_LIMITS, ...limits };
  }

  /** Runs `attempt` (the password check) unless a limit is spent; counts it if it fails. */
  async login<T>(ip: string, email: string, res: Response, attempt: () => Promise<T>): Promise<T> {
    // Redis holds a digest of the email, not the address itself.
    const emailKey = createHash('sha256').update(email.trim().toLowerCase()).digest('base64url');
    const perEmailAndIp = `dash-login-fail:${emailKey}:${ip}`;
    // Whether this address failed on this email within the hour: past the backstop, it decides refuse or slow.
    const failedHere = `dash-login-failed-here:${emailKey}:${ip}`;
    const perEmail = `dash-login-fail-email:${emailKey}`;
    const { loginPerIp, loginFailuresPerEmailAndIp: local, loginFailuresPerEmailPerHour: global } = this.limits;

    await this.rateLimits.enforce(res, `dash-login-ip:${ip}`, loginPerIp, TOO_MANY);
    const [here, everywhere] = await Promise.all([
      this.rateLimits.peek(perEmailAndIp, local),
      this.rateLimits.peek(perEmail, global, HOUR_SECONDS),
    ]);
    if (!here.allowed) refuse(res, here, TOO_MANY);
    if (!everywhere.allowed) {
      const failed = await this.rateLimits.peek(failedHere, 1, HOUR_SECONDS);
      if (!failed.allowed) refuse(res, failed, TOO_MANY);
      const failures = everywhere.used ?? global;
      await new Promise((resolve) =>
        setTimeout(resolve, backstopDelayMs(failures, global, this.limits.backstopDelayMs, this.limits.backstopMaxDelayMs)),
      );
    }

    try {
      const result = await attempt();
      await Promise.all([this.rateLimits.forget(perEmailAndIp, local), this.rateLimits.forget(failedHere, 1, HOUR_SECONDS)]);
      return result;
    } catch (err) {
      if (err instanceof KilnError && err.code === ErrorCode.InvalidCredentials) {
        await Promise.all([
          this.rateLimits.penalize(perEmailAndIp, local),
          this.rateLimits.penalize(perEmail, global, HOUR_SECONDS),
          this.rateLimits.penalize(failedHere, 1, HOUR_SECONDS),
        ]);
      }
      throw err;
    }
  }

  async signup(ip: string, res: Response): Promise<RateDecision> {
    return this.rateLimits.enforce(res, `dash-signup-ip:${ip}`, this.limits.signupPerIp, TOO_MANY);
  }
}
