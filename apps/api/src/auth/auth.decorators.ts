import { applyDecorators, createParamDecorator, ExecutionContext, SetMetadata, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiResponse } from '@nestjs/swagger';
import { AuthenticatedKey, Scope } from '@app/keys';
import { ApiKeyGuard, REQUIRED_SCOPE } from './api-key.guard';
import { ErrorResponseDto } from '../common/error.response.dto';

/** A public-API route: needs a key carrying `scope`; documents the common errors. */
export function ApiKeyAuth(scope: Scope) {
  return applyDecorators(
    SetMetadata(REQUIRED_SCOPE, scope),
    UseGuards(ApiKeyGuard),
    ApiBearerAuth('apiKey'),
    ApiResponse({ status: 400, description: 'invalid_request and other validation codes', type: ErrorResponseDto }),
    ApiResponse({ status: 401, description: 'unauthorized, invalid_api_key, key_revoked', type: ErrorResponseDto }),
    ApiResponse({ status: 403, description: 'account_disabled, api_not_available_on_plan, insufficient_scope', type: ErrorResponseDto }),
    ApiResponse({ status: 429, description: 'rate_limited; honour Retry-After', type: ErrorResponseDto }),
    ApiResponse({ status: 500, description: 'internal_error', type: ErrorResponseDto }),
  );
}

/** The authenticated key, account and plan of the request. */
export const CurrentKey = createParamDecorator(
  (_: unknown, ctx: ExecutionContext): AuthenticatedKey => ctx.switchToHttp().getRequest<{ user: AuthenticatedKey }>().user,
);
