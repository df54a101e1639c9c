import { Global, Inject, Logger, Module, OnModuleInit } from '@nestjs/common';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { MetricsModule } from '@app/metrics';
import { TASK_OUTCOME_HOOK } from '@app/tasks';
import { WebhookEndpointsService } from './webhook-endpoints.service';
import { WebhookOutbox } from './webhook-outbox';
import { SecretBox } from './webhook-secret';
import { WebhookSender } from './webhook-sender.service';

/**
 * Webhooks: endpoints, the outbox and the sender. Global because the tasks lib's state store
 * takes the outbox as its TaskOutcomeHook (an optional injection), and both apps write task
 * outcomes. The generator starts WebhookSender; the api never does.
 */
@Global()
@Module({
  imports: [MetricsModule],
  providers: [
    {
      provide: SecretBox,
      inject: [KILN_CONFIG],
      useFactory: (c: KilnConfig) => new SecretBox(c.webhooks.secretKey, c.webhooks.previousSecretKeys),
    },
    WebhookOutbox,
    { provide: TASK_OUTCOME_HOOK, useExisting: WebhookOutbox },
    WebhookEndpointsService,
    WebhookSender,
  ],
  exports: [TASK_OUTCOME_HOOK, WebhookOutbox, WebhookEndpointsService, WebhookSender, SecretBox],
})
export class WebhooksModule implements OnModuleInit {
  private readonly logger = new Logger('Webhooks');

  constructor(@Inject(KILN_CONFIG) private readonly config: KilnConfig) {}

  onModuleInit(): void {
    if (!this.config.webhooks.secretKey) {
      this.logger.warn('WEBHOOK_SECRET_KEY is not set: webhook endpoints cannot be created (503) and deliveries are not sent');
    }
  }
}
