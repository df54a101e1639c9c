import { CanActivate, ExecutionContext, Injectable } from '@nestjs/common';
import type { Request } from 'express';
import { AuthenticatedSession, SessionsService } from '@app/dashboard';
import { ErrorCode, KilnError } from '@app/errors';

export type SessionRequest = Request & { dashboardSession?: AuthenticatedSession };

/**
 * Dashboard routes: `Authorization: Bearer kiln_sess_...`. Missing -> 401 unauthorized;
 * unknown, expired or signed out -> 401 invalid_credentials; disabled account -> 403.
 * An API key is not a session token (different prefix), so it is refused here.
 */
@Injectable()
export class SessionGuard implements CanActivate {
  constructor(private readonly sessions: SessionsService) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const req = context.switchToHttp().getRequest<SessionRequest>();
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    if (!match) throw new KilnError(ErrorCode.Unauthorized, 'Missing session: send Authorization: Bearer <token>');
    req.dashboardSession = await this.sessions.authenticate(match[1]);
    return true;
  }
}
