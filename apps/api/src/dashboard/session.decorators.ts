import { applyDecorators, createParamDecorator, ExecutionContext, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse } from '@nestjs/swagger';
import type { AuthenticatedSession } from '@app/sessions';
import { ErrorResponseDto } from '../common/error.response.dto';
import { SessionGuard, SessionRequest } from './session.guard';

/** A dashboard route that needs a signed-in account holder; documents the common errors. */
export function SessionAuth() {
  return applyDecorators(
    UseGuards(SessionGuard),
    ApiBearerAuth('session'),
    ApiResponse({
      status: 401,
      description: 'unauthorized (no token), invalid_credentials (unknown, expired or signed-out session)',
      type: ErrorResponseDto,
    }),
    ApiResponse({ status: 403, description: 'account_disabled', type: ErrorResponseDto }),
    ApiResponse({
      status: 429,
      description: 'rate_limited (requests per session, failed tokens per IP); honour Retry-After',
      type: ErrorResponseDto,
    }),
    ApiResponse({ status: 500, description: 'internal_error', type: ErrorResponseDto }),
  );
}

/** The signed-in session, account and plan of the request. */
export const CurrentSession = createParamDecorator(
  (_: unknown, ctx: ExecutionContext): AuthenticatedSession => ctx.switchToHttp().getRequest<SessionRequest>().dashboardSession!,
);
