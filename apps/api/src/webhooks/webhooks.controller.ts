import { Body, Controller, Param, Query } from '@nestjs/common';
import { ApiTags } from '@nestjs/swagger';
import { AuthenticatedKey } from '@app/keys';
import { WebhookEndpointsService } from '@app/webhooks';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { CreateWebhookRequestDto, WebhookDeliveriesQueryDto } from './dto/webhook.request.dto';
import { WebhookAnswers, WebhookRoute } from './webhook-routes';

@ApiTags('Public API')
@ApiKeyAuth('webhooks:manage')
@Controller('webhooks')
export class WebhooksController {
  private readonly answers: WebhookAnswers;

  constructor(webhooks: WebhookEndpointsService) {
    this.answers = new WebhookAnswers(webhooks);
  }

  @WebhookRoute.create('createWebhookEndpoint')
  create(@CurrentKey() auth: AuthenticatedKey, @Body() body: CreateWebhookRequestDto) {
    return this.answers.create(auth.account.id, body);
  }

  @WebhookRoute.list('listWebhookEndpoints')
  list(@CurrentKey() auth: AuthenticatedKey) {
    return this.answers.list(auth.account.id);
  }

  @WebhookRoute.remove('deleteWebhookEndpoint')
  remove(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string) {
    return this.answers.remove(auth.account.id, id);
  }

  @WebhookRoute.rotate('rotateWebhookSecret')
  rotate(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string) {
    return this.answers.rotate(auth.account.id, id);
  }

  @WebhookRoute.test('testWebhookEndpoint')
  test(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string) {
    return this.answers.test(auth.account.id, id);
  }

  @WebhookRoute.deliveries('listWebhookDeliveries')
  deliveries(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string, @Query() q: WebhookDeliveriesQueryDto) {
    return this.answers.deliveries(auth.account.id, id, q);
  }
}
