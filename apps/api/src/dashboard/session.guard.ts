import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import type { Request, Response } from 'express';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';
import { AuthenticatedSession, SessionsService } from '@app/sessions';
import { AuthFailureThrottle } from '../auth/auth-failure-throttle.service';
import { RateLimitService } from '../auth/rate-limit.service';
import { checkCsrf, readSessionCookie } from './session-cookie';

export type SessionRequest = Request & { dashboardSession?: AuthenticatedSession };

/**
 * Dashboard routes: `Authorization: Bearer kiln_sess_...`, or the web app's session cookie
 * (session-cookie.ts: its writes must carry X-Kiln-Session, 400 before the token is even
 * looked at). The header wins when both are sent. Missing -> 401 unauthorized;
 * unknown, expired or signed out -> 401 invalid_credentials (counted against the address,
 * AuthFailureThrottle); disabled account -> 403. Each session may make
 * DASHBOARD_REQUESTS_PER_MINUTE requests (429 beyond). An API key is not a session token
 * (different prefix), so it is refused here.
 */
@Injectable()
export class SessionGuard implements CanActivate {
  constructor(
    private readonly sessions: SessionsService,
    private readonly failures: AuthFailureThrottle,
    private readonly rateLimits: RateLimitService,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const req = http.getRequest<SessionRequest>();
    const res = http.getResponse<Response>();
    const auth = await this.failures.guard(req, res, () => this.sessions.authenticate(sessionToken(req)));
    await this.rateLimits.enforce(
      res,
      `session:${auth.session.id}`,
      this.config.auth.dashboardRequestsPerMinute,
      'Too many requests on this session; retry after the Retry-After delay',
    );
    req.dashboardSession = auth;
    return true;
  }
}

function sessionToken(req: Request): string {
  if (req.headers.authorization === undefined) {
    const cookie = readSessionCookie(req);
    if (cookie !== null) {
      checkCsrf(req);
      return cookie;
    }
  }
  const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
  if (!match) throw new KilnError(ErrorCode.Unauthorized, 'Missing session: send Authorization: Bearer <token> or sign in to the web app');
  return match[1];
}
