import Stripe from 'stripe';
import type { StripeConfig } from '@app/config';

/** The Stripe SDK client, or null when selling credits is off (no STRIPE_SECRET_KEY). */
export const STRIPE_CLIENT = Symbol('STRIPE_CLIENT');

/**
 * One network retry: the SDK retries connection errors, timeouts, 409s and 5xx with the
 * same idempotency key (Stripe answers a replayed key with the first result), so a lost
 * answer never makes a second session; more would keep a buyer waiting longer than the
 * dashboard request is worth. Each attempt is bounded by STRIPE_TIMEOUT_MS.
 */
export const STRIPE_MAX_NETWORK_RETRIES = 1;

export function stripeClient(config: StripeConfig): Stripe {
  return new Stripe(config.secretKey, {
    timeout: config.timeoutMs,
    maxNetworkRetries: STRIPE_MAX_NETWORK_RETRIES,
    telemetry: false,
    appInfo: { name: 'Kiln' },
    ...(config.apiBase ?? {}),
  });
}
