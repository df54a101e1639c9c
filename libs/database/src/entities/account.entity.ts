import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { PlanEntity, PlanKey } from './plan.entity';

export const ACCOUNT_STATUSES = ['active', 'disabled'] as const;
export type AccountStatus = (typeof ACCOUNT_STATUSES)[number];

@Entity({ name: 'accounts' })
@Check('accounts_balance_never_negative', '"balance" >= 0')
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

  /** Credits; only ever changed together with a ledger row (see libs/billing). */
  @Column({ type: 'bigint', default: 0, transformer: { to: (v: number) => v, from: (v: string) => Number(v) } })
  balance: number;

  /** Milliseconds, as the list's keyset cursor holds them (like batches.created_at). */
  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', precision: 3 })
  createdAt: Date;
}
