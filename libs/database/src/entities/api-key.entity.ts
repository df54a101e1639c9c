import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { AccountEntity } from './account.entity';

@Entity({ name: 'api_keys' })
@Check('api_keys_budget_period', `"budget_period" IN ('day', 'week', 'month')`)
@Check('api_keys_budget_whole', `("budget_credits" IS NULL) = ("budget_period" IS NULL)`)
@Check('api_keys_budget_positive', '"budget_credits" > 0')
@Index('api_keys_account_idx', ['accountId'])
export class ApiKeyEntity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  @Column({ type: 'text' })
  name: string;

  /** SHA-256 of the full secret, hex. The secret itself is never stored. */
  @Index('api_keys_hash_unique', { unique: true })
  @Column({ name: 'key_hash', type: 'text' })
  keyHash: string;

  /** Display hint such as kiln_live_abcd...wxyz. */
  @Column({ type: 'text' })
  hint: string;

  @Column({ type: 'text', array: true })
  scopes: string[];

  @Column({ name: 'credit_cap_per_day', type: 'integer', nullable: true })
  creditCapPerDay: number | null;

  /** A budget set as `budget` (libs/billing key-budget.ts); null with budgetPeriod when none. */
  @Column({ name: 'budget_credits', type: 'integer', nullable: true })
  budgetCredits: number | null;

  @Column({ name: 'budget_period', type: 'text', nullable: true })
  budgetPeriod: 'day' | 'week' | 'month' | null;

  /** The models this key may create batches with (catalog keys); empty: every model. */
  @Column({ type: 'text', array: true, default: () => "'{}'" })
  models: string[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'last_used_at', type: 'timestamptz', nullable: true })
  lastUsedAt: Date | null;

  @Column({ name: 'revoked_at', type: 'timestamptz', nullable: true })
  revokedAt: Date | null;

  @Column({ name: 'expires_at', type: 'timestamptz', nullable: true })
  expiresAt: Date | null;
}
