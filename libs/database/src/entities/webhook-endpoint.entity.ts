import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { AccountEntity } from './account.entity';

/** Where an account wants its events sent (libs/webhooks). */
@Entity({ name: 'webhook_endpoints' })
@Index('webhook_endpoints_account_idx', ['accountId'])
@Index('webhook_endpoints_circuit_idx', ['circuitOpenUntil'], { where: 'circuit_open_until IS NOT NULL' })
export class WebhookEndpointEntity {
  /** Drawn by the writer: it is the associated data of the secret's encryption. */
  @PrimaryColumn('uuid')
  id: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  @Column({ type: 'text' })
  url: string;

  @Column({ type: 'text', array: true })
  events: string[];

  @Column({ type: 'text', nullable: true })
  description: string | null;

  /** The signing secret, AES-256-GCM encrypted under WEBHOOK_SECRET_KEY (webhook-secret.ts). */
  @Column({ name: 'secret_enc', type: 'text' })
  secretEnc: string;

  /** The secret before the last rotation, still signing until previous_secret_expires_at. */
  @Column({ name: 'previous_secret_enc', type: 'text', nullable: true })
  previousSecretEnc: string | null;

  @Column({ name: 'previous_secret_expires_at', type: 'timestamptz', nullable: true })
  previousSecretExpiresAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /** Set when a delivery was answered 410 Gone; a disabled endpoint gets nothing more. */
  @Column({ name: 'disabled_at', type: 'timestamptz', nullable: true })
  disabledAt: Date | null;

  /** Attempts in a row that failed (0 after any success): the circuit opens at WEBHOOK_CIRCUIT_FAILURES. */
  @Column({ name: 'consecutive_failures', type: 'integer', default: 0 })
  consecutiveFailures: number;

  /** While in the future, senders leave the endpoint alone; once past, one probe attempt at a time. */
  @Column({ name: 'circuit_open_until', type: 'timestamptz', nullable: true })
  circuitOpenUntil: Date | null;
}
