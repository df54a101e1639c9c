import { Inject, Injectable, Logger } from '@nestjs/common';
import Stripe from 'stripe';
import { KILN_CONFIG, KilnConfig } from '@app/config';
import { ErrorCode, invalidRequest, KilnError } from '@app/errors';
import { paymentsDisabled } from './payments.errors';
import { idOf, isKilnMetadata, sessionPurchase } from './purchase-metadata';
import { PurchaseOutcome, PurchasesService } from './purchases.service';
import { STRIPE_CLIENT } from './stripe-client';

/** The Stripe events Kiln acts on; the webhook endpoint in Stripe should send these only. */
export const HANDLED_STRIPE_EVENTS = ['checkout.session.completed', 'checkout.session.async_payment_succeeded', 'charge.refunded'] as const;

export interface StripeEventResult {
  eventId: string;
  type: string;
  outcome: PurchaseOutcome | 'ignored';
}

/** POST /v1/stripe/webhook: a signed event in, the ledger moved at most once for it. */
@Injectable()
export class StripeEventsService {
  private readonly log = new Logger(StripeEventsService.name);

  constructor(
    @Inject(STRIPE_CLIENT) private readonly stripe: Stripe | null,
    @Inject(KILN_CONFIG) private readonly config: KilnConfig,
    private readonly purchases: PurchasesService,
  ) {}

  /**
   * Verifies the signature over the body exactly as it arrived (the SDK's constructEvent:
   * HMAC-SHA256 with STRIPE_WEBHOOK_SECRET, timestamp within 5 minutes), then acts. A
   * forgery is refused before anything is read from it.
   */
  async receive(rawBody: unknown, signature: string | undefined): Promise<StripeEventResult> {
    if (!this.stripe || !this.config.stripe) throw paymentsDisabled();
    if (!Buffer.isBuffer(rawBody) || rawBody.length === 0) throw invalidRequest('body', 'missing', 'The event body is missing');
    if (!signature) throw invalidRequest('stripe-signature', 'missing', 'The Stripe-Signature header is missing');
    let event: Stripe.Event;
    try {
      event = this.stripe.webhooks.constructEvent(rawBody, signature, this.config.stripe.webhookSecret);
    } catch {
      throw new KilnError(ErrorCode.InvalidRequest, 'The Stripe-Signature header does not verify this body', {
        field: 'stripe-signature',
        reason: 'bad_signature',
      });
    }
    const outcome = await this.act(event);
    this.log.log(`Stripe event ${event.id} (${event.type}): ${outcome}`);
    return { eventId: event.id, type: event.type, outcome };
  }

  private async act(event: Stripe.Event): Promise<PurchaseOutcome | 'ignored'> {
    switch (event.type) {
      case 'checkout.session.completed':
      case 'checkout.session.async_payment_succeeded': {
        const purchase = sessionPurchase(event.data.object);
        return purchase ? this.purchases.creditPaidSession(purchase, event.data.object.payment_status) : 'not_kiln';
      }
      case 'charge.refunded': {
        const outcome = await this.purchases.takeBackRefund(event.data.object);
        if (outcome !== 'unknown_purchase') return outcome;
        if (!(await this.isKilnPayment(event.data.object))) return 'not_kiln';
        // Kiln's, but its session's paid event has not been handled yet (Stripe does not
        // promise order): fail, so Stripe delivers the refund again later, after the purchase.
        throw new KilnError(ErrorCode.ServiceUnavailable, 'The refunded purchase is not recorded yet; deliver this event again later', {
          retryAfter: 60,
        });
      }
      default:
        return 'ignored';
    }
  }

  /**
   * Whether a charge no purchase matches was paid through a Kiln session: the metadata Kiln
   * put on the PaymentIntent, on the charge when Stripe copied it there, else asked of Stripe
   * (a refund of another product's payment on the same account costs that one call).
   */
  private async isKilnPayment(charge: Stripe.Charge): Promise<boolean> {
    if (isKilnMetadata(charge.metadata)) return true;
    const paymentIntentId = idOf(charge.payment_intent);
    if (!paymentIntentId || !this.stripe) return false;
    try {
      // No retry here: Stripe redelivers the event itself, and its delivery should not wait for two attempts.
      return isKilnMetadata((await this.stripe.paymentIntents.retrieve(paymentIntentId, {}, { maxNetworkRetries: 0 })).metadata);
    } catch (err) {
      // Not a payment of this Stripe account at all.
      if ((err as { statusCode?: number }).statusCode === 404) return false;
      this.log.warn(`Could not read PaymentIntent ${paymentIntentId} from Stripe: ${(err as Error).message}`);
      throw new KilnError(ErrorCode.ServiceUnavailable, 'Stripe did not answer; deliver this event again later', { retryAfter: 60 });
    }
  }
}
