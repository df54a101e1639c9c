import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { PlanEntity, PlanKey } from './plan.entity';

export const ACCOUNT_STATUSES = ['active', 'disabled'] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];

@Check('accounts_low_credits_threshold_positive', '"low_credits_threshold" > 0')
@Entity({ name: 'accounts' })
@Index('accounts_email_lower_unique', { synchronize: false })
export class AccountEntity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  /** Compared case-insensitively: a unique index on lower(email) lives in the migration. */
  @Column({ type: 'text' })
  email: string;

  @Column({ name: 'password_hash', type: 'text', nullable: true })
  passwordHash: string | null;

  @Column({ name: 'plan_key', type: 'text' })
  planKey: PlanKey;

  @ManyToOne(() => PlanEntity)
  @JoinColumn({ name: 'plan_key' })
  plan?: PlanEntity;

  @Column({ type: 'text', default: 'active' })
  status: AccountStatus;

  /**
   * Credits; only ever changed together with a ledger row (see libs/billing). Below zero only
   * after a purchase refund took back credits already spent (docs/billing.md#refunds).
   */
  @Column({ type: 'bigint', default: 0, transformer: { to: (v: number) => v, from: (v: string) => Number(v) } })
  balance: number;

  /** A batch charge taking the balance below it writes a `credits.low` webhook event; null: none. */
  @Column({
    name: 'low_credits_threshold',
    type: 'bigint',
    nullable: true,
    transformer: { to: (v: number | null) => v, from: (v: string | null) => (v === null ? null : Number(v)) },
  })
  lowCreditsThreshold: number | null;

  /** Milliseconds, as the list's keyset cursor holds them (like batches.created_at). */
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', precision: 3 })
  createdAt: Date;
}
