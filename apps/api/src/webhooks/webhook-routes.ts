import { applyDecorators, Delete, Get, HttpCode, Post } from '@nestjs/common';
import { ApiAcceptedResponse, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiResponse } from '@nestjs/swagger';
import { decodeCursor, parseLimit } from '@app/database';
import { WebhookEndpointsService } from '@app/webhooks';
import { ErrorResponseDto } from '../common/error.response.dto';
import { CreateWebhookRequestDto, WebhookDeliveriesQueryDto } from './dto/webhook.request.dto';
import {
  CreatedWebhookResponseDto,
  WebhookDeliveryDto,
  WebhookDeliveryListResponseDto,
  WebhookDeliveryResponseDto,
  WebhookEndpointDto,
  WebhookListResponseDto,
  WebhookSecretResponseDto,
} from './dto/webhook.response.dto';

const NOT_FOUND = { status: 404, description: 'not_found: no such endpoint on this account', type: ErrorResponseDto };

/*
 * The webhook routes, served twice: under /v1/webhooks to API keys (webhooks.controller.ts)
 * and under /v1/dashboard/webhooks to signed-in holders. Each route's HTTP and OpenAPI
 * decorators are here, given the route's operationId (the two controllers' differ), and so
 * is each answer, so the two controllers hold only their auth. Decorators are listed
 * bottom-up, the order in which stacked ones apply, so the document reads as it did.
 */
export const WebhookRoute = {
  create: (operationId: string) =>
    applyDecorators(
      ApiResponse({ status: 503, description: 'service_unavailable: the server has no WEBHOOK_SECRET_KEY', type: ErrorResponseDto }),
      ApiResponse({ status: 403, description: 'endpoint_limit_exceeded (10 per account)', type: ErrorResponseDto }),
      ApiResponse({
        status: 400,
        description: 'invalid_request; details {field: "url", reason: "forbidden_address"} for a non-public address',
        type: ErrorResponseDto,
      }),
      ApiCreatedResponse({ type: CreatedWebhookResponseDto }),
      ApiOperation({ operationId, summary: 'Register an endpoint; its signing secret is shown only in this response' }),
      Post(),
    ),
  list: (operationId: string) =>
    applyDecorators(
      ApiOkResponse({ type: WebhookListResponseDto }),
      ApiOperation({ operationId, summary: "The account's webhook endpoints, oldest first" }),
      Get(),
    ),
  remove: (operationId: string) =>
    applyDecorators(
      ApiResponse(NOT_FOUND),
      ApiNoContentResponse(),
      ApiOperation({ operationId, summary: 'Delete an endpoint and its delivery log' }),
      HttpCode(204),
      Delete(':id'),
    ),
  rotate: (operationId: string) =>
    applyDecorators(
      ApiResponse(NOT_FOUND),
      ApiOkResponse({ type: WebhookSecretResponseDto }),
      ApiOperation({ operationId, summary: 'A new signing secret; for 24 h deliveries carry signatures with both' }),
      HttpCode(200),
      Post(':id/rotate-secret'),
    ),
  test: (operationId: string) =>
    applyDecorators(
      ApiResponse(NOT_FOUND),
      ApiAcceptedResponse({ type: WebhookDeliveryResponseDto }),
      ApiOperation({ operationId, summary: 'Send a ping event to this endpoint' }),
      HttpCode(202),
      Post(':id/test'),
    ),
  deliveries: (operationId: string) =>
    applyDecorators(
      ApiResponse(NOT_FOUND),
      ApiOkResponse({ type: WebhookDeliveryListResponseDto }),
      ApiOperation({ operationId, summary: "The endpoint's deliveries, newest first (keyset pagination)" }),
      Get(':id/deliveries'),
    ),
};

/** Each route's answer for an account, whoever authenticated it. */
export class WebhookAnswers {
  constructor(private readonly webhooks: WebhookEndpointsService) {}

  async create(accountId: string, body: CreateWebhookRequestDto): Promise<CreatedWebhookResponseDto> {
    const { endpoint, secret } = await this.webhooks.create(accountId, body);
    return { endpoint: WebhookEndpointDto.from(endpoint), secret };
  }

  async list(accountId: string): Promise<WebhookListResponseDto> {
    return { endpoints: (await this.webhooks.list(accountId)).map((e) => WebhookEndpointDto.from(e)) };
  }

  remove(accountId: string, id: string): Promise<void> {
    return this.webhooks.remove(accountId, id);
  }

  async rotate(accountId: string, id: string): Promise<WebhookSecretResponseDto> {
    return { secret: await this.webhooks.rotateSecret(accountId, id) };
  }

  async test(accountId: string, id: string): Promise<WebhookDeliveryResponseDto> {
    return { delivery: WebhookDeliveryDto.from(await this.webhooks.sendTest(accountId, id)) };
  }

  async deliveries(accountId: string, id: string, q: WebhookDeliveriesQueryDto): Promise<WebhookDeliveryListResponseDto> {
    const page = await this.webhooks.deliveries(accountId, id, parseLimit(q.limit), decodeCursor(q.cursor));
    return {
      endpoint: WebhookEndpointDto.from(page.endpoint),
      deliveries: page.deliveries.map((d) => WebhookDeliveryDto.from(d)),
      nextCursor: page.nextCursor,
    };
  }
}
