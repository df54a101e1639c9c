import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { AccountEntity } from './account.entity';

export const LEDGER_KINDS = ['grant', 'adjustment', 'batch_charge', 'task_refund', 'cancel_refund', 'purchase', 'purchase_refund'] as const;
export type LedgerKind = (typeof LEDGER_KINDS)[number];

const bigintToNumber = { to: (v: number) => v, from: (v: string | null) => (v === null ? null : Number(v)) };

/**
 * One row per change of balance; the balance equals the sum of `amount`.
 * Partial unique indexes (in the migration) make a batch charge and a task refund
 * happen at most once whatever retries or redeliveries occur.
 */
@Entity({ name: 'ledger_entries' })
@Index('ledger_account_created_idx', ['accountId', 'createdAt', 'id'])
@Index('ledger_key_day_idx', ['apiKeyId', 'chargeDay'])
@Index('ledger_batch_charge_once', ['batchId'], { unique: true, where: `kind = 'batch_charge'` })
@Index('ledger_task_refund_once', ['taskId'], { unique: true, where: `kind = 'task_refund'` })
export class LedgerEntryEntity {
  /** bigint, surfaced as a string by the pg driver. */
  @PrimaryGeneratedColumn({ type: 'bigint' })
  id: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  /** Signed: negative for charges, positive for grants and refunds. */
  @Column({ type: 'bigint', transformer: bigintToNumber })
  amount: number;

  @Column({ name: 'balance_after', type: 'bigint', transformer: bigintToNumber })
  balanceAfter: number;

  @Column({ type: 'text' })
  kind: LedgerKind;

  @Column({ type: 'text', nullable: true })
  reason: string | null;

  @Column({ name: 'batch_id', type: 'uuid', nullable: true })
  batchId: string | null;

  @Column({ name: 'task_id', type: 'uuid', nullable: true })
  taskId: string | null;

  /** The key that made the original charge; refunds carry it too, for the daily cap. */
  @Column({ name: 'api_key_id', type: 'uuid', nullable: true })
  apiKeyId: string | null;

  /** UTC day of the original charge, so a refund counts against the same day's cap. */
  @Column({ name: 'charge_day', type: 'date', nullable: true })
  chargeDay: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
