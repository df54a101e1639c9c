export * from './checkout.service';
export * from './credit-packs.service';
export * from './payments.errors';
export * from './payments.module';
export { METADATA, refundedCredits } from './purchase-metadata';
export type { PurchaseOutcome } from './purchases.service';
export * from './stripe-client';
export * from './stripe-events.service';
