import type Stripe from 'stripe';
import { isUuid } from '@app/database';

/**
 * The metadata keys Kiln puts on its Checkout Sessions (and their PaymentIntents): how an
 * event is told apart from other payments on the same Stripe account. Never rename them:
 * sessions already paid carry these names.
 */
export const METADATA = { accountId: 'kiln_account_id', packId: 'kiln_pack_id', credits: 'kiln_credits' } as const;

/** What a paid session buys, read from the session Kiln created. */
export interface SessionPurchase {
  sessionId: string;
  accountId: string;
  /** Null when the id is not one of this installation's packs' shape. */
  packId: string | null;
  credits: number;
  amount: number;
  currency: string;
  paymentIntentId: string | null;
}

const MAX_CREDITS = 1_000_000_000;

/** The purchase a Checkout Session stands for, or null when it is not a session Kiln created. */
export function sessionPurchase(session: Stripe.Checkout.Session): SessionPurchase | null {
  const credits = Number(session.metadata?.[METADATA.credits]);
  const accountId = session.client_reference_id;
  if (session.mode !== 'payment' || !accountId || !isUuid(accountId)) return null;
  if (!Number.isSafeInteger(credits) || credits <= 0 || credits > MAX_CREDITS) return null;
  const packId = session.metadata?.[METADATA.packId] ?? null;
  return {
    sessionId: session.id,
    accountId,
    packId: packId && isUuid(packId) ? packId : null,
    credits,
    amount: session.amount_total ?? 0,
    currency: session.currency ?? '',
    paymentIntentId: idOf(session.payment_intent),
  };
}

/** True when metadata (a PaymentIntent's, or a charge's copy of it) is that of a Kiln purchase. */
export function isKilnMetadata(metadata: Stripe.Metadata | null | undefined): boolean {
  return metadata?.[METADATA.credits] !== undefined;
}

/** An expandable field's id, whether Stripe sent the id or the object. */
export function idOf(field: string | { id: string } | null | undefined): string | null {
  if (!field) return null;
  return typeof field === 'string' ? field : field.id;
}

/**
 * The credits a refund of `refunded` out of a charge of `amount` takes back: the same share
 * of the purchase's credits, rounded down (a partial refund never takes a credit more than
 * its share; a full refund takes them all). Cumulative, as Stripe's amount_refunded is: each
 * refund takes the difference between this and what earlier ones took.
 */
export function refundedCredits(credits: number, refunded: number, amount: number): number {
  if (amount <= 0 || refunded <= 0) return 0;
  const share = (BigInt(credits) * BigInt(Math.min(refunded, amount))) / BigInt(amount);
  return Number(share);
}
