import type Stripe from 'stripe';
import { refundedCredits, sessionPurchase } from './purchase-metadata';

describe('refundedCredits', () => {
  it('takes the refunded share, rounded down; a full refund takes everything', () => {
    expect(refundedCredits(1000, 2000, 2000)).toBe(1000);
    expect(refundedCredits(1000, 500, 2000)).toBe(250);
    expect(refundedCredits(1000, 1, 3)).toBe(333);
    expect(refundedCredits(1000, 2, 3)).toBe(666);
    expect(refundedCredits(1000, 0, 3)).toBe(0);
  });

  it('never more than the credits, whatever the event says, and exact for large numbers', () => {
    expect(refundedCredits(1000, 5000, 2000)).toBe(1000);
    expect(refundedCredits(1000, 10, 0)).toBe(0);
    expect(refundedCredits(999_999_999, 99_999_998, 99_999_999)).toBe(999_999_988);
  });
});

describe('sessionPurchase', () => {
  const account = '0d4c7c4e-2f55-4a8e-9d0e-0b6a3c1f2e11';
  const session = (over: Partial<Stripe.Checkout.Session>) =>
    ({
      id: 'cs_test_1',
      mode: 'payment',
      client_reference_id: account,
      metadata: { kiln_credits: '500', kiln_pack_id: 'not-a-uuid' },
      amount_total: 900,
      currency: 'usd',
      payment_intent: { id: 'pi_1' },
      ...over,
    }) as Stripe.Checkout.Session;

  it("reads Kiln's sessions; a pack id of the wrong shape becomes null, an expanded PaymentIntent its id", () => {
    expect(sessionPurchase(session({}))).toEqual({
      sessionId: 'cs_test_1',
      accountId: account,
      packId: null,
      credits: 500,
      amount: 900,
      currency: 'usd',
      paymentIntentId: 'pi_1',
    });
  });

  it.each([
    ['another mode', { mode: 'subscription' as const }],
    ['no account', { client_reference_id: null }],
    ['an account that is not an id', { client_reference_id: 'acct' }],
    ['no credits', { metadata: {} }],
    ['credits that are not a positive integer', { metadata: { kiln_credits: '1.5' } }],
  ])('is not a purchase with %s', (_, over) => {
    expect(sessionPurchase(session(over))).toBeNull();
  });
});
