import { Module } from '@nestjs/common';
import { BillingModule } from '@app/billing';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { CheckoutService } from './checkout.service';
import { CreditPacksService } from './credit-packs.service';
import { PurchasesService } from './purchases.service';
import { STRIPE_CLIENT, stripeClient } from './stripe-client';
import { StripeEventsService } from './stripe-events.service';

/**
 * Selling credits (docs/billing.md): credit packs, Stripe Checkout to pay for one, and the
 * Stripe events that credit (and on refund take back) the ledger through BillingService.
 */
@Module({
  imports: [BillingModule],
  providers: [
    {
      provide: STRIPE_CLIENT,
      inject: [KILN_CONFIG],
      useFactory: (config: KilnConfig) => (config.stripe ? stripeClient(config.stripe) : null),
    },
    CreditPacksService,
    CheckoutService,
    PurchasesService,
    StripeEventsService,
  ],
  exports: [CreditPacksService, CheckoutService, StripeEventsService],
})
export class PaymentsModule {}
