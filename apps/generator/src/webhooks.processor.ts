import { BeforeApplicationShutdown, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { WebhookSender } from '@app/webhooks';

/** Starts the webhook sender with the generator, and stops it (finishing its round) on shutdown. */
@Injectable()
export class WebhooksProcessor implements OnApplicationBootstrap, BeforeApplicationShutdown {
  constructor(private readonly sender: WebhookSender) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.sender.start();
  }

  async beforeApplicationShutdown(): Promise<void> {
    await this.sender.stop();
  }
}
