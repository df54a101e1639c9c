import { applyDecorators, createParamDecorator, ExecutionContext } from '@nestjs/common';
import { ApiHeader, ApiResponse } from '@nestjs/swagger';
import type { Request } from 'express';
import { IdempotentRequest, idempotentRequest } from '@app/idempotency';
import { ErrorResponseDto } from '../common/error.response.dto';

/**
 * The request's `Idempotency-Key` with a hash of `route` and the body as parsed (null without
 * the header). The body is the one JSON gave, before validation shapes it, so what is
 * compared is what the client sent; a malformed key is refused with invalid_request.
 */
export const Idempotency = createParamDecorator((route: string, ctx: ExecutionContext): IdempotentRequest | null => {
  const req = ctx.switchToHttp().getRequest<Request>();
  return idempotentRequest(req.headers['idempotency-key'], route, req.body);
});

/** The OpenAPI side of an idempotent create: the header, the replay header and the two refusals. */
export function ApiIdempotentCreate() {
  return applyDecorators(
    ApiHeader({
      name: 'Idempotency-Key',
      required: false,
      description:
        'Makes the create safe to retry: 1-255 printable ASCII characters, kept 24 h per account. The same key with the same body ' +
        'answers the first 201 again (Idempotent-Replayed: true) and charges nothing.',
      example: 'order-4711-run-2',
    }),
    ApiResponse({
      status: 409,
      description: 'idempotency_key_in_use: the first request with this key is still running; honour Retry-After',
      type: ErrorResponseDto,
    }),
    ApiResponse({ status: 422, description: 'idempotency_key_reused: this key was used with a different request', type: ErrorResponseDto }),
  );
}

/** The response header that marks a replayed 201. */
export const IDEMPOTENT_REPLAYED_HEADER = {
  'Idempotent-Replayed': {
    description: '"true" when this 201 is the remembered answer to an earlier request with the same key',
    schema: { type: 'string' },
  },
};
