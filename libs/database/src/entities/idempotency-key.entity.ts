import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { AccountEntity } from './account.entity';

/**
 * A remembered batch creation: the account's `Idempotency-Key`, what was asked (a hash of the
 * route and the canonical body) and the 201 body that answered it. Written in the creation's
 * own transaction, so a batch never exists without its key; the primary key (account, key) is
 * what keeps racing requests with one key to one batch. Swept 24 h after creation.
 */
@Entity({ name: 'idempotency_keys' })
@Index('idempotency_keys_created_idx', ['createdAt'])
export class IdempotencyKeyEntity {
  @PrimaryColumn({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  @PrimaryColumn({ type: 'text' })
  key: string;

  /** SHA-256 (hex) of the route and the body with its object keys sorted. */
  @Column({ name: 'request_hash', type: 'text' })
  requestHash: string;

  /** The remembered 201 body, answered again on a replay. */
  @Column({ type: 'jsonb' })
  response: Record<string, unknown>;

  @Column({ name: 'batch_id', type: 'uuid' })
  batchId: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
