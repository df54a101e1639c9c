import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { timingSafeEqual, createHash } from 'node:crypto';
import type { Request, Response } from 'express';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';
import { AuthFailureThrottle } from '../auth/auth-failure-throttle.service';

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Operator routes: `Bearer <ADMIN_TOKEN>`; with no token configured they do not exist (404).
 * Wrong tokens count against the sender's address (AuthFailureThrottle).
 */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly failures: AuthFailureThrottle,
  ) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const expected = this.config.adminToken;
    if (!expected) throw new KilnError(ErrorCode.NotFound, 'Not found');
    const http = context.switchToHttp();
    const req = http.getRequest<Request>();
    return this.failures.guard(req, http.getResponse<Response>(), () => {
      const match = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
      if (!match) throw new KilnError(ErrorCode.Unauthorized, 'Missing admin token');
      // Compare digests so the comparison takes the same time whatever the length.
      if (!timingSafeEqual(digest(match[1].trim()), digest(expected))) {
        throw new KilnError(ErrorCode.Unauthorized, 'Admin token not recognised');
      }
      return true;
    });
  }
}
