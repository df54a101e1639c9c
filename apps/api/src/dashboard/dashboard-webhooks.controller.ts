/* The public webhook routes (webhooks.controller.ts) for a signed-in holder: same routes (webhook-routes.ts), same wire shapes. */
import { Body, Controller, Param, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import type { AuthenticatedSession } from '@app/sessions';
import { WebhookEndpointsService } from '@app/webhooks';
import { CurrentSession, SessionAuth } from './session.decorators';
import { CreateWebhookRequestDto, WebhookDeliveriesQueryDto } from '../webhooks/dto/webhook.request.dto';
import { WebhookAnswers, WebhookRoute } from '../webhooks/webhook-routes';

@ApiTags('Dashboard')
@SessionAuth()
@Controller('dashboard/webhooks')
export class DashboardWebhooksController {
  private readonly answers: WebhookAnswers;

  constructor(webhooks: WebhookEndpointsService) {
    this.answers = new WebhookAnswers(webhooks);
  }

  @WebhookRoute.create('createDashboardWebhookEndpoint')
  create(@CurrentSession() auth: AuthenticatedSession, @Body() body: CreateWebhookRequestDto) {
    return this.answers.create(auth.account.id, body);
  }

  @WebhookRoute.list('listDashboardWebhookEndpoints')
  list(@CurrentSession() auth: AuthenticatedSession) {
    return this.answers.list(auth.account.id);
  }

  @WebhookRoute.remove('deleteDashboardWebhookEndpoint')
  remove(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string) {
    return this.answers.remove(auth.account.id, id);
  }

  @WebhookRoute.rotate('rotateDashboardWebhookSecret')
  rotate(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string) {
    return this.answers.rotate(auth.account.id, id);
  }

  @WebhookRoute.test('testDashboardWebhookEndpoint')
  test(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string) {
    return this.answers.test(auth.account.id, id);
  }

  @WebhookRoute.deliveries('listDashboardWebhookDeliveries')
  deliveries(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string, @Query() q: WebhookDeliveriesQueryDto) {
    return this.answers.deliveries(auth.account.id, id, q);
  }
}
