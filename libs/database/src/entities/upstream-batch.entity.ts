import { Check, Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import type { ProviderRoute } from './model.entity';

/**
 * collecting: the group and its tasks are recorded, its input not yet uploaded (or uploaded
 * without the id recorded); uploaded: input id recorded; created: the upstream batch id is
 * recorded, polled at poll_at; ended: the upstream ended it (outcome), its results not yet
 * all read; read: every task of the group has ended; failed: the upstream refused the group
 * (its tasks failed and refunded).
 */
export const UPSTREAM_BATCH_STATES = ['collecting', 'uploaded', 'created', 'ended', 'read', 'failed'] as const;
export type UpstreamBatchState = (typeof UPSTREAM_BATCH_STATES)[number];

/** One upstream batch of economy tasks (migration 1763888400260); written by libs/tasks only. */
@Check('upstream_batches_state_known', `"state" IN ('collecting', 'uploaded', 'created', 'ended', 'read', 'failed')`)
@Entity({ name: 'upstream_batches' })
@Index('upstream_batches_due_idx', ['pollAt'], { where: `state NOT IN ('read', 'failed')` })
export class UpstreamBatchEntity {
  /** Kiln's group id: what the upstream batch is tagged with (OpenAI metadata, Gemini displayName), found again by it after a crash. */
  @PrimaryGeneratedColumn('uuid', { primaryKeyConstraintName: 'PK_upstream_batches' })
  id: string;

  @Column({ type: 'text' })
  model: string;

  /** The route the group was made for (the batches' snapshot). */
  @Column({ type: 'jsonb' })
  provider: ProviderRoute;

  @Column({ type: 'text', default: 'collecting' })
  state: UpstreamBatchState;

  /** Tasks recorded in the group. */
  @Column({ type: 'integer' })
  lines: number;

  @Column({ name: 'input_id', type: 'text', nullable: true })
  inputId: string | null;

  /** The upstream's batch id (UpstreamBatchRef.batchId), recorded before any wait; operators only. */
  @Column({ name: 'upstream_batch_id', type: 'text', nullable: true })
  upstreamBatchId: string | null;

  /** UpstreamBatchRef.state. */
  @Column({ name: 'upstream_state', type: 'jsonb', nullable: true })
  upstreamState: Record<string, string> | null;

  @Column({ name: 'upstream_status', type: 'text', nullable: true })
  upstreamStatus: string | null;

  /** Where the results are, as the ending poll said (UpstreamBatchStatus `found`). */
  @Column({ type: 'jsonb', nullable: true })
  found: Record<string, string> | null;

  /** completed | expired | failed | cancelled, once ended. */
  @Column({ type: 'text', nullable: true })
  outcome: string | null;

  @Column({ name: 'succeeded_count', type: 'integer', default: 0 })
  succeededCount: number;

  @Column({ name: 'failed_count', type: 'integer', default: 0 })
  failedCount: number;

  /** Failed tries at the current step (passing trouble of the upload, create or results). */
  @Column({ type: 'integer', default: 0 })
  tries: number;

  @Column({ name: 'last_error', type: 'text', nullable: true })
  lastError: string | null;

  /** Not worked on before this. */
  @Column({ name: 'poll_at', type: 'timestamptz', default: () => 'now()' })
  pollAt: Date;

  /** The generator holding the group, and until when (it renews; past it another takes over). */
  @Column({ type: 'text', nullable: true })
  poller: string | null;

  @Column({ name: 'lease_until', type: 'timestamptz', nullable: true })
  leaseUntil: Date | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;

  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true })
  finishedAt: Date | null;
}
