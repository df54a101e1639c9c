import { ExecutionContext, Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { AuthGuard } from '@nestjs/passport';
import type { Request, Response } from 'express';
import { ErrorCode, KilnError } from '@app/errors';
import { AuthenticatedKey, Scope } from '@app/keys';
import { AuthFailureThrottle } from './auth-failure-throttle.service';
import { RateLimitService } from './rate-limit.service';

export const REQUIRED_SCOPE = 'kiln:required-scope';

/**
 * Public-API guard, in the order of docs/api.md#validation-order: authenticate the key (401/403),
 * then its rate limit (429), then its scope (403 insufficient_scope). An address that keeps
 * presenting unknown keys is refused 429 before the key is looked up (AuthFailureThrottle).
 */
@Injectable()
export class ApiKeyGuard extends AuthGuard('api-key') {
  constructor(
    private readonly reflector: Reflector,
    private readonly rateLimits: RateLimitService,
    private readonly failures: AuthFailureThrottle,
  ) {
    super({ session: false });
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const req = http.getRequest<Request & { user: AuthenticatedKey }>();
    const res = http.getResponse<Response>();
    await this.failures.guard(req, res, () => super.canActivate(context) as Promise<boolean>);
    const { key, plan } = req.user;

    await this.rateLimits.enforce(res, `key:${key.id}`, plan.requestsPerMinute, 'Too many requests; retry after the Retry-After delay');

    // A scope set on the controller class applies to each of its routes (a route's own wins).
    const scope = this.reflector.getAllAndOverride<Scope | undefined>(REQUIRED_SCOPE, [context.getHandler(), context.getClass()]);
    if (scope && !key.scopes.includes(scope)) {
      throw new KilnError(ErrorCode.InsufficientScope, `This key lacks the ${scope} scope`, { required: scope });
    }
    return true;
  }

  handleRequest<TUser>(err: unknown, user: TUser | false): TUser {
    // eslint-disable-next-line @typescript-eslint/only-throw-error -- rethrows whatever the key strategy threw, unchanged, for the error filter to map
    if (err) throw err;
    if (!user) throw new KilnError(ErrorCode.Unauthorized, 'Missing API key: send Authorization: Bearer <key>');
    return user;
  }
}
