import { Injectable, Logger } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type Stripe from 'stripe';
import { DataSource } from 'typeorm';
import { BillingService } from '@app/billing';
import { queryRows } from '@app/database';
import { idOf, refundedCredits, SessionPurchase } from './purchase-metadata';

/** What an event did: the webhook answers it, and tests assert on it. */
export type PurchaseOutcome =
  'credited' | 'already_credited' | 'awaiting_payment' | 'refund_taken' | 'refund_already_taken' | 'unknown_account' | 'not_kiln';

/**
 * Paid sessions and their refunds, against the ledger; the only writer of credit_purchases.
 * Each write and its ledger row share one transaction, so a crash between them leaves
 * neither, and Stripe's next delivery of the event does the whole thing.
 */
@Injectable()
export class PurchasesService {
  private readonly log = new Logger(PurchasesService.name);

  constructor(
    @InjectDataSource() private readonly db: DataSource,
    private readonly billing: BillingService,
  ) {}

  /**
   * Credits a paid session exactly once. The purchase row is inserted first, under the unique
   * checkout_session_id: a second delivery of the same or another event of the session
   * (completed and async_payment_succeeded, in any order, or at the same moment) waits for
   * the first transaction and then inserts nothing, so it credits nothing.
   */
  async creditPaidSession(purchase: SessionPurchase, paymentStatus: string): Promise<PurchaseOutcome> {
    // 'unpaid': a delayed method (bank debit); async_payment_succeeded brings the paid session.
    if (paymentStatus !== 'paid') return 'awaiting_payment';
    return this.db.transaction(async (m) => {
      const [row] = await queryRows<{ id: string }>(
        m,
        `INSERT INTO credit_purchases (account_id, pack_id, checkout_session_id, payment_intent_id, credits, amount, currency)
         SELECT a.id, (SELECT p.id FROM credit_packs p WHERE p.id = $2), $3, $4, $5, $6, $7 FROM accounts a WHERE a.id = $1
         ON CONFLICT (checkout_session_id) DO NOTHING
         RETURNING id`,
        [
          purchase.accountId,
          purchase.packId,
          purchase.sessionId,
          purchase.paymentIntentId,
          purchase.credits,
          purchase.amount,
          purchase.currency,
        ],
      );
      if (row) {
        await this.billing.creditPurchase(m, {
          accountId: purchase.accountId,
          credits: purchase.credits,
          reason: `Bought ${purchase.credits} credits (${formatMoney(purchase.amount, purchase.currency)}, Checkout Session ${purchase.sessionId})`,
        });
        return 'credited';
      }
      const [known] = await queryRows<{ id: string }>(m, `SELECT id FROM credit_purchases WHERE checkout_session_id = $1`, [
        purchase.sessionId,
      ]);
      if (known) return 'already_credited';
      // Paid for an account that no longer exists: nothing to credit; the operator refunds in Stripe.
      this.log.warn(`Checkout Session ${purchase.sessionId} was paid for account ${purchase.accountId}, which does not exist`);
      return 'unknown_account';
    });
  }

  /**
   * Takes back the refunded share of a purchase. Stripe's amount_refunded is the charge's
   * running total, so under the purchase row's lock the credits to take are the total's
   * share less what earlier refunds took: each refunded amount is taken once, a replayed or
   * older event (a total not above the one recorded) takes nothing.
   */
  async takeBackRefund(charge: Stripe.Charge): Promise<PurchaseOutcome | 'unknown_purchase'> {
    const paymentIntentId = idOf(charge.payment_intent);
    return (paymentIntentId && (await this.takeBack(paymentIntentId, charge))) || 'unknown_purchase';
  }

  private async takeBack(paymentIntentId: string, charge: Stripe.Charge): Promise<PurchaseOutcome | null> {
    return this.db.transaction(async (m) => {
      const [p] = await queryRows<{ id: string; account_id: string; credits: string; credits_refunded: string; amount_refunded: string }>(
        m,
        `SELECT id, account_id, credits, credits_refunded, amount_refunded FROM credit_purchases WHERE payment_intent_id = $1 FOR UPDATE`,
        [paymentIntentId],
      );
      if (!p) return null;
      if (charge.amount_refunded <= Number(p.amount_refunded)) return 'refund_already_taken';
      const total = refundedCredits(Number(p.credits), charge.amount_refunded, charge.amount);
      const take = total - Number(p.credits_refunded);
      await m.query(`UPDATE credit_purchases SET amount_refunded = $2, credits_refunded = $3 WHERE id = $1`, [
        p.id,
        charge.amount_refunded,
        Math.max(total, Number(p.credits_refunded)),
      ]);
      if (take > 0) {
        await this.billing.takeBackPurchase(m, {
          accountId: p.account_id,
          credits: take,
          reason: `Refund: ${formatMoney(charge.amount_refunded, charge.currency)} of ${formatMoney(charge.amount, charge.currency)} refunded on charge ${charge.id}`,
        });
      }
      return 'refund_taken';
    });
  }
}

/** 1000 usd -> "10.00 USD"; zero-decimal currencies are shown as Stripe counts them. */
function formatMoney(amount: number, currency: string): string {
  const code = currency.toUpperCase();
  try {
    const digits = new Intl.NumberFormat('en', { style: 'currency', currency: code }).resolvedOptions().maximumFractionDigits ?? 2;
    return `${(amount / 10 ** digits).toFixed(digits)} ${code}`;
  } catch {
    return `${amount} ${code}`;
  }
}
