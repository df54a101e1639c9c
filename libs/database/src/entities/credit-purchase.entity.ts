import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { AccountEntity } from './account.entity';
import { CreditPackEntity } from './credit-pack.entity';

const bigintToNumber = { to: (v: number) => v, from: (v: string) => Number(v) };

/**
 * One paid Checkout Session (migration 1763888400320), recorded in the transaction that
 * credits it: the unique checkout_session_id is what makes each session credit once, whatever
 * replays, reorders or concurrent deliveries of its events. Refunds move credits_refunded and
 * amount_refunded up (never down) under the row's lock. Written by libs/payments only.
 */
@Entity({ name: 'credit_purchases' })
@Index('credit_purchases_session_once', ['checkoutSessionId'], { unique: true })
@Index('credit_purchases_payment_intent_idx', ['paymentIntentId'], { unique: true, where: `payment_intent_id IS NOT NULL` })
@Index('credit_purchases_account_idx', ['accountId', 'createdAt'])
@Check('credit_purchases_refund_within', '"credits_refunded" >= 0 AND "credits_refunded" <= "credits"')
export class CreditPurchaseEntity {
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'PK_credit_purchases' })
  id: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id', foreignKeyConstraintName: 'credit_purchases_account_fk' })
  account?: AccountEntity;

  /** Null when the session named a pack this installation does not have (still credited: it was paid). */
  @Column({ name: 'pack_id', type: 'uuid', nullable: true })
  packId: string | null;

  @ManyToOne(() => CreditPackEntity, { onDelete: 'SET NULL' })
  @JoinColumn({ name: 'pack_id', foreignKeyConstraintName: 'credit_purchases_pack_fk' })
  pack?: CreditPackEntity;

  @Column({ name: 'checkout_session_id', type: 'text' })
  checkoutSessionId: string;

  /** How charge.refunded finds the purchase (a charge names its PaymentIntent, not its session). */
  @Column({ name: 'payment_intent_id', type: 'text', nullable: true })
  paymentIntentId: string | null;

  @Column({ type: 'bigint', transformer: bigintToNumber })
  credits: number;

  /** What the buyer paid (the session's amount_total), in the currency's smallest unit. */
  @Column({ type: 'bigint', transformer: bigintToNumber })
  amount: number;

  @Column({ type: 'text' })
  currency: string;

  @Column({ name: 'credits_refunded', type: 'bigint', default: 0, transformer: bigintToNumber })
  creditsRefunded: number;

  /** The highest cumulative amount_refunded seen on the purchase's charge. */
  @Column({ name: 'amount_refunded', type: 'bigint', default: 0, transformer: bigintToNumber })
  amountRefunded: number;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
