import { CanActivate, ExecutionContext, Inject, Injectable } from '@nestjs/common';
import { timingSafeEqual, createHash } from 'node:crypto';
import type { Request } from 'express';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';

const digest = (s: string) => createHash('sha256').update(s).digest();

/** Operator routes: `Bearer <ADMIN_TOKEN>`; with no token configured they do not exist (404). */
@Injectable()
export class AdminGuard implements CanActivate {
  constructor(@Inject(KILN_CONFIG) private readonly config: KilnConfig) {}

  canActivate(context: ExecutionContext): boolean {
    const expected = this.config.adminToken;
    if (!expected) throw new KilnError(ErrorCode.NotFound, 'Not found');
    const header = context.switchToHttp().getRequest<Request>().headers.authorization ?? '';
    const match = /^Bearer\s+(.+)$/i.exec(header);
    if (!match) throw new KilnError(ErrorCode.Unauthorized, 'Missing admin token');
    // Compare digests so the comparison takes the same time whatever the length.
    if (!timingSafeEqual(digest(match[1].trim()), digest(expected))) {
      throw new KilnError(ErrorCode.Unauthorized, 'Admin token not recognised');
    }
    return true;
  }
}
