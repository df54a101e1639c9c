import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { AccountEntity } from './account.entity';
import { ProviderRoute } from './model.entity';
import type { FailoverSettings } from '@app/providers';
import type { BatchTier } from '@app/geometry';

/** A batch's statuses, in the order the API documents them (its response DTOs use this list). */
export const BATCH_STATUSES = ['pending', 'running', 'succeeded', 'partial', 'failed', 'cancelled'] as const;
export type BatchStatus = (typeof BATCH_STATUSES)[number];
export const REF_MODES = ['none', 'each', 'combined'] as const;
export type RefMode = (typeof REF_MODES)[number];
export const OUTPUT_FORMATS = ['png', 'jpeg', 'webp'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/**
 * "Done" as the batch row stores it (libs/tasks/src/batch-status.ts holds the rule and its
 * counts form): the tally sets finished_at in the write that settles the last task. A reader
 * of the row in SQL asks these, never finished_at by hand. BATCH_OPEN_SQL is also the
 * predicate of batches_unfinished_idx, so a query that uses it can use the index.
 */
export const BATCH_DONE_SQL = 'finished_at IS NOT NULL';
export const BATCH_OPEN_SQL = 'finished_at IS NULL';

/** Why a batch was cancelled without its caller's cancel (batches.cancel_reason). */
export const BATCH_CANCEL_REASONS = ['deadline'] as const;
export type BatchCancelReason = (typeof BATCH_CANCEL_REASONS)[number];

// The batch tiers belong to the geometry lib, the floor below providers (which price by tier).
export { BATCH_TIERS } from '@app/geometry';
export type { BatchTier } from '@app/geometry';

@Check('batches_tier_known', `"tier" IN ('standard', 'economy')`)
@Entity({ name: 'batches' })
@Index('batches_account_created_idx', ['accountId', 'createdAt', 'id'])
// The dashboard's batch filters (status, model) read a range of these, newest first.
@Index('batches_account_status_created_idx', ['accountId', 'status', 'createdAt', 'id'])
@Index('batches_account_model_created_idx', ['accountId', 'model', 'createdAt', 'id'])
@Index('batches_unfinished_idx', ['accountId'], { where: BATCH_OPEN_SQL })
@Index('batches_preview_retention_idx', ['finishedAt'], { where: `preview_url IS NOT NULL` })
@Index('batches_preview_url_idx', ['previewUrl'], { where: `preview_url IS NOT NULL` })
@Index('batches_open_deadline_idx', ['deadline'], { where: `deadline IS NOT NULL AND finished_at IS NULL` })
export class BatchEntity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  @ManyToOne(() => AccountEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'account_id' })
  account?: AccountEntity;

  @Column({ name: 'api_key_id', type: 'uuid', nullable: true })
  apiKeyId: string | null;

  @Column({ type: 'jsonb' })
  prompts: string[];

  @Column({ type: 'text' })
  model: string;

  @Column({ name: 'aspect_ratio', type: 'text' })
  aspectRatio: string;

  @Column({ type: 'text' })
  resolution: string;

  @Column({ type: 'text' })
  quality: string;

  @Column({ type: 'text', nullable: true })
  background: string | null;

  @Column({ name: 'count_per_combo', type: 'integer' })
  countPerCombo: number;

  @Column({ name: 'ref_mode', type: 'text' })
  refMode: RefMode;

  @Column({ name: 'ref_images', type: 'jsonb' })
  refImages: string[];

  @Column({ type: 'integer' })
  total: number;

  @Column({ type: 'text', nullable: true })
  note: string | null;

  /** Task n (1-based, fan-out order) renders with seed + n - 1; null: seeds drawn from the batch id. */
  @Column({ type: 'integer', nullable: true })
  seed: number | null;

  /** The format every image of the batch is stored and served in. */
  @Column({ name: 'output_format', type: 'text', default: 'png' })
  outputFormat: OutputFormat;

  /** Price of one image at creation; refunds use it so later price changes never matter. */
  @Column({ name: 'unit_cost', type: 'integer' })
  unitCost: number;

  @Column({ name: 'credits_charged', type: 'integer' })
  creditsCharged: number;

  @Column({ name: 'credits_refunded', type: 'integer', default: 0 })
  creditsRefunded: number;

  /** Provider routing of the model when the batch was created (catalog edits apply to later batches). */
  @Column({ type: 'jsonb' })
  provider: ProviderRoute;

  /** The model's chain of routes when the batch was created (routes[0] is `provider`); null: `provider` alone. */
  @Column({ type: 'jsonb', nullable: true })
  routes: ProviderRoute[] | null;

  /** The model's failover settings when the batch was created; null: the defaults. */
  @Column({ type: 'jsonb', nullable: true })
  failover: FailoverSettings | null;

  @Column({ name: 'width', type: 'integer' })
  width: number;

  @Column({ name: 'height', type: 'integer' })
  height: number;

  @Column({ type: 'text', default: 'pending' })
  status: BatchStatus;

  @Column({ name: 'succeeded_count', type: 'integer', default: 0 })
  succeededCount: number;

  @Column({ name: 'failed_count', type: 'integer', default: 0 })
  failedCount: number;

  @Column({ name: 'cancelled_count', type: 'integer', default: 0 })
  cancelledCount: number;

  /** When the batch was first cancelled (a later cancel changes nothing). */
  @Column({ name: 'cancelled_at', type: 'timestamptz', precision: 3, nullable: true })
  cancelledAt: Date | null;

  /**
   * Bumped by every write that changes what the batch's GET shows (its tasks' writes
   * included), in the same statement: the ETag is made of it.
   */
  @Column({
    type: 'bigint',
    default: 0,
    transformer: { to: (v: number) => v, from: (v: string | null) => (v === null ? null : Number(v)) },
  })
  version: number;

  @Column({ name: 'preview_url', type: 'text', nullable: true })
  previewUrl: string | null;

  @Column({ name: 'created_via_api', type: 'boolean' })
  createdViaApi: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz', precision: 3 })
  createdAt: Date;

  /** Set once every task is terminal; an unfinished batch counts against the concurrency limit. */
  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true })
  finishedAt: Date | null;

  @Column({ type: 'text', default: 'standard' })
  tier: BatchTier;

  /** Economy: the time by which every task has ended (created + the model's economyWindowHours); null for standard. */
  @Column({ name: 'expires_at', type: 'timestamptz', precision: 3, nullable: true })
  expiresAt: Date | null;

  /** The caller's deadline: its tasks not sent by then are cancelled and refunded (the generator's deadline sweep). */
  @Column({ name: 'deadline', type: 'timestamptz', precision: 3, nullable: true })
  deadline: Date | null;

  /** Why cancelled_at was set: 'deadline' when the deadline sweep cancelled work; null for a caller's cancel (or none). */
  @Column({ name: 'cancel_reason', type: 'text', nullable: true })
  cancelReason: BatchCancelReason | null;
}
