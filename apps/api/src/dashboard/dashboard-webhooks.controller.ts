/* The public webhook routes (webhooks.controller.ts) for a signed-in holder: same service, same wire shapes. */
import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query } from '@nestjs/common';
import { ApiAcceptedResponse, ApiCreatedResponse, ApiNoContentResponse, ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { decodeCursor, parseLimit } from '@app/database';
import type { AuthenticatedSession } from '@app/dashboard';
import { WebhookEndpointsService } from '@app/webhooks';
import { CurrentSession, SessionAuth } from './session.decorators';
import { ErrorResponseDto } from '../common/error.response.dto';
import { CreateWebhookRequestDto, WebhookDeliveriesQueryDto } from '../webhooks/dto/webhook.request.dto';
import {
  CreatedWebhookResponseDto,
  WebhookDeliveryDto,
  WebhookDeliveryListResponseDto,
  WebhookDeliveryResponseDto,
  WebhookEndpointDto,
  WebhookListResponseDto,
  WebhookSecretResponseDto,
} from '../webhooks/dto/webhook.response.dto';

const NOT_FOUND = { status: 404, description: 'not_found: no such endpoint on this account', type: ErrorResponseDto };

@ApiTags('Dashboard')
@SessionAuth()
@Controller('dashboard/webhooks')
export class DashboardWebhooksController {
  constructor(private readonly webhooks: WebhookEndpointsService) {}

  @Post()
  @ApiOperation({ operationId: 'createDashboardWebhookEndpoint', summary: 'Register an endpoint; its signing secret is shown only in this response' })
  @ApiCreatedResponse({ type: CreatedWebhookResponseDto })
  @ApiResponse({ status: 400, description: 'invalid_request; details {field: "url", reason: "forbidden_address"} for a non-public address', type: ErrorResponseDto })
  @ApiResponse({ status: 403, description: 'endpoint_limit_exceeded (10 per account)', type: ErrorResponseDto })
  @ApiResponse({ status: 503, description: 'service_unavailable: the server has no WEBHOOK_SECRET_KEY', type: ErrorResponseDto })
  async create(@CurrentSession() auth: AuthenticatedSession, @Body() body: CreateWebhookRequestDto): Promise<CreatedWebhookResponseDto> {
    const { endpoint, secret } = await this.webhooks.create(auth.account.id, body);
    return { endpoint: WebhookEndpointDto.from(endpoint), secret };
  }

  @Get()
  @ApiOperation({ operationId: 'listDashboardWebhookEndpoints', summary: "The account's webhook endpoints, oldest first" })
  @ApiOkResponse({ type: WebhookListResponseDto })
  async list(@CurrentSession() auth: AuthenticatedSession): Promise<WebhookListResponseDto> {
    return { endpoints: (await this.webhooks.list(auth.account.id)).map(WebhookEndpointDto.from) };
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({ operationId: 'deleteDashboardWebhookEndpoint', summary: 'Delete an endpoint and its delivery log' })
  @ApiNoContentResponse()
  @ApiResponse(NOT_FOUND)
  async remove(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string): Promise<void> {
    await this.webhooks.remove(auth.account.id, id);
  }

  @Post(':id/rotate-secret')
  @HttpCode(200)
  @ApiOperation({ operationId: 'rotateDashboardWebhookSecret', summary: 'A new signing secret; for 24 h deliveries carry signatures with both' })
  @ApiOkResponse({ type: WebhookSecretResponseDto })
  @ApiResponse(NOT_FOUND)
  async rotate(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string): Promise<WebhookSecretResponseDto> {
    return { secret: await this.webhooks.rotateSecret(auth.account.id, id) };
  }

  @Post(':id/test')
  @HttpCode(202)
  @ApiOperation({ operationId: 'testDashboardWebhookEndpoint', summary: 'Send a ping event to this endpoint' })
  @ApiAcceptedResponse({ type: WebhookDeliveryResponseDto })
  @ApiResponse(NOT_FOUND)
  async test(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string): Promise<WebhookDeliveryResponseDto> {
    return { delivery: WebhookDeliveryDto.from(await this.webhooks.sendTest(auth.account.id, id)) };
  }

  @Get(':id/deliveries')
  @ApiOperation({ operationId: 'listDashboardWebhookDeliveries', summary: "The endpoint's deliveries, newest first (keyset pagination)" })
  @ApiOkResponse({ type: WebhookDeliveryListResponseDto })
  @ApiResponse(NOT_FOUND)
  async deliveries(
    @CurrentSession() auth: AuthenticatedSession,
    @Param('id') id: string,
    @Query() q: WebhookDeliveriesQueryDto,
  ): Promise<WebhookDeliveryListResponseDto> {
    const page = await this.webhooks.deliveries(auth.account.id, id, parseLimit(q.limit), decodeCursor(q.cursor));
    return { deliveries: page.deliveries.map(WebhookDeliveryDto.from), nextCursor: page.nextCursor };
  }
}
