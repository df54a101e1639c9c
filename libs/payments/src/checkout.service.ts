import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import Stripe from 'stripe';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, KilnError } from '@app/errors';
import { CreditPacksService } from './credit-packs.service';
import { paymentsDisabled } from './payments.errors';
import { METADATA } from './purchase-metadata';
import { STRIPE_CLIENT } from './stripe-client';

export interface CheckoutBuyer {
  accountId: string;
  email: string;
}

/** Starts purchases: one Stripe Checkout Session (a one-time payment) per call. */
@Injectable()
export class CheckoutService {
  private readonly log = new Logger(CheckoutService.name);

  constructor(
    @Inject(STRIPE_CLIENT) private readonly stripe: Stripe | null,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly packs: CreditPacksService,
  ) {}

  /** The session's URL, where the buyer pays; the account is credited by the webhook once Stripe says it is paid. */
  async startCheckout(buyer: CheckoutBuyer, packId: string): Promise<{ url: string; sessionId: string }> {
    if (!this.stripe || !this.config.stripe) throw paymentsDisabled();
    const pack = await this.packs.requireActive(packId);
    const metadata = { [METADATA.accountId]: buyer.accountId, [METADATA.packId]: pack.id, [METADATA.credits]: String(pack.credits) };
    const returnTo = this.config.stripe.returnUrlBase;
    let session: Stripe.Checkout.Session;
    try {
      session = await this.stripe.checkout.sessions.create(
        {
          mode: 'payment',
          client_reference_id: buyer.accountId,
          customer_email: buyer.email,
          line_items: [
            { quantity: 1, price_data: { currency: pack.currency, unit_amount: pack.priceCents, product_data: { name: pack.name } } },
          ],
          metadata,
          // Copied onto the charge: how a refund is recognised as Kiln's before its purchase is recorded.
          payment_intent_data: { metadata },
          success_url: `${returnTo}?checkout=success&session_id={CHECKOUT_SESSION_ID}`,
          cancel_url: `${returnTo}?checkout=cancelled`,
        },
        // One key per purchase attempt: the SDK's retry of this call replays it, never a second session.
        { idempotencyKey: `kiln-checkout-${randomUUID()}` },
      );
    } catch (err) {
      const e = err as { type?: string; message?: string; requestId?: string; statusCode?: number };
      this.log.error(
        `Stripe refused or did not answer a Checkout Session: ${e.type ?? 'error'} ${e.statusCode ?? ''} ${e.message ?? ''} (request ${e.requestId ?? 'none'})`,
      );
      throw new KilnError(ErrorCode.ServiceUnavailable, 'Payments are unavailable right now; retry shortly');
    }
    if (!session.url) throw new KilnError(ErrorCode.ServiceUnavailable, 'Payments are unavailable right now; retry shortly');
    return { url: session.url, sessionId: session.id };
  }
}
