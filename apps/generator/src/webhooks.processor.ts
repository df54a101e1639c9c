import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { TaskRunnerService } from '@app/generation';
import { WebhookSender } from '@app/webhooks';

/**
 * Starts the webhook sender with the generator, and stops it (finishing its round) on
 * shutdown. Deliveries yield to renders in flight when the two compete for the loop.
 */
@Injectable()
export class WebhooksProcessor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(
    private readonly sender: WebhookSender,
    private readonly runner: TaskRunnerService,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.sender.start({ busy: () => this.runner.inFlightCount > 0 });
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.sender.stop();
  }
}
