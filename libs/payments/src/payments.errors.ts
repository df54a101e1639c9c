import { ErrorCode, KilnError } from '@app/errors';

/** Every route of selling credits while it is off (no STRIPE_SECRET_KEY): as if it did not exist. */
export function paymentsDisabled(): KilnError {
  return new KilnError(ErrorCode.NotFound, 'Buying credits is not enabled on this installation', { reason: 'payments_disabled' });
}
