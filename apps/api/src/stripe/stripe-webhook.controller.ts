import { Controller, Headers, HttpCode, Post, Req } from '@nestjs/common';
import { ApiExcludeController } from '@nestjs/swagger';
import type { Request } from 'express';
import { StripeEventsService } from '@app/payments';

/**
 * Stripe's calls to Kiln (docs/billing.md): no Kiln credential, the Stripe-Signature header
 * instead. The body is the raw bytes (stripeWebhookBodyParser in app.setup.ts), as the
 * signature was computed over them. Stripe's side of the interface, not a client's: kept
 * out of the OpenAPI document.
 */
@ApiExcludeController()
@Controller('stripe')
export class StripeWebhookController {
  constructor(private readonly events: StripeEventsService) {}

  @Post('webhook')
  @HttpCode(200)
  async receive(@Req() req: Request, @Headers('stripe-signature') signature: string | undefined) {
    const result = await this.events.receive(req.body, signature);
    return { received: true, ...result };
  }
}
