import { Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { AccountEntity } from './account.entity';

export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/**
 * One event for one endpoint: the outbox row, written in the transaction of the change it
 * reports, and the delivery log. No foreign key to the endpoint: an event written while its
 * endpoint is being deleted must not fail the task write it belongs to (the sender drops
 * deliveries whose endpoint is gone).
 */
@Entity({ name: 'webhook_deliveries' })
@Index('webhook_deliveries_event_endpoint_unique', ['eventId', 'endpointId'], { unique: true })
@Index('webhook_deliveries_endpoint_created_idx', ['endpointId', 'createdAt', 'id'])
@Index('webhook_deliveries_due_idx', ['nextAttemptAt'], { where: `status = 'pending'` })
@Index('webhook_deliveries_endpoint_due_idx', ['endpointId', 'nextAttemptAt', 'id'], { where: `status = 'pending'` })
export class WebhookDeliveryEntity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  /** The webhook-id header: the same on every attempt and for every endpoint of the event. */
  @Column({ name: 'event_id', type: 'text' })
  eventId: string;

  @Column({ name: 'endpoint_id', type: 'uuid' })
  endpointId: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  @Column({ type: 'text' })
  type: string;

  /** The exact JSON body sent on every attempt (signatures cover these bytes). */
  @Column({ type: 'text' })
  body: string;

  @Column({ type: 'text', default: 'pending' })
  status: WebhookDeliveryStatus;

  /** Attempts started, including one in flight. */
  @Column({ type: 'integer', default: 0 })
  attempts: number;

  /** When the next attempt is due; while one is in flight, when its lease ends. */
  @Column({ name: 'next_attempt_at', type: 'timestamptz', nullable: true })
  nextAttemptAt: Date | null;

  @Column({ name: 'last_status_code', type: 'integer', nullable: true })
  lastStatusCode: number | null;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  @Column({ name: 'delivered_at', type: 'timestamptz', nullable: true })
  deliveredAt: Date | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
