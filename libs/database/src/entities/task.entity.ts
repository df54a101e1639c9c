import { Check, Column, CreateDateColumn, Entity, Index, JoinColumn, ManyToOne, PrimaryGeneratedColumn } from 'typeorm';
import { BatchEntity, BatchTier } from './batch.entity';
import { UpstreamBatchEntity } from './upstream-batch.entity';

/** A task's statuses, in the order the API documents them. */
export const TASK_STATUSES = ['pending', 'queued', 'running', 'succeeded', 'failed', 'cancelled'] as const;
export type TaskStatus = (typeof TASK_STATUSES)[number];

/**
 * Why a task failed, for clients to branch on (the API's enum of it): the upstream refused
 * the request (a 400), refused its content (content_refused: the upstream's own content
 * policy, not retried), stayed unavailable (429, 5xx, timeouts) until the attempts ran out,
 * the route lacks its key or settings, or Kiln itself could not complete it.
 */
export const TASK_ERROR_CODES = [
  'upstream_rejected',
  'content_refused',
  'upstream_unavailable',
  'provider_not_configured',
  'internal',
] as const;
export type TaskErrorCode = (typeof TASK_ERROR_CODES)[number];

@Check('tasks_tier_known', `"tier" IN ('standard', 'economy')`)
@Entity({ name: 'tasks' })
@Index('tasks_batch_seq_idx', ['batchId', 'seq'], { unique: true })
@Index('tasks_pending_fair_idx', ['seq', 'createdAt', 'id'], { where: `status = 'pending' AND tier = 'standard'` })
@Index('tasks_economy_waiting_idx', ['createdAt', 'id'], { where: `status = 'pending' AND tier = 'economy'` })
@Index('tasks_upstream_batch_idx', ['upstreamBatchId'], { where: `upstream_batch_id IS NOT NULL` })
@Index('tasks_unfinished_idx', ['status', 'updatedAt'], { where: `status IN ('pending', 'queued', 'running')` })
@Index('tasks_result_retention_idx', ['finishedAt'], { where: `result_key IS NOT NULL` })
@Index('tasks_result_key_idx', ['resultKey'], { where: `result_key IS NOT NULL` })
@Index('tasks_result_token_idx', ['resultToken'], { unique: true })
@Index('tasks_upstream_cancel_due_idx', ['upstreamCancelAt'], { where: `upstream_cancel IN ('asked', 'sending')` })
@Index('tasks_upstream_waiting_idx', ['upstreamPollAt'], { where: `status = 'running' AND upstream_poll_at IS NOT NULL` })
export class TaskEntity {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'batch_id', type: 'uuid' })
  batchId: string;

  @ManyToOne(() => BatchEntity, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'batch_id' })
  batch?: BatchEntity;

  @Column({ name: 'account_id', type: 'uuid' })
  accountId: string;

  /** Position in the fan-out: prompt order, then reference order, then copy index. */
  @Column({ type: 'integer' })
  seq: number;

  @Column({ type: 'text' })
  prompt: string;

  /** Upload ids of the reference images attached to this task. */
  @Column({ name: 'ref_upload_ids', type: 'uuid', array: true, default: () => "'{}'" })
  refUploadIds: string[];

  @Column({ type: 'integer' })
  seed: number;

  @Column({ type: 'text', default: 'pending' })
  status: TaskStatus;

  @Column({ type: 'integer', default: 0 })
  progress: number;

  @Column({ type: 'integer', default: 0 })
  attempts: number;

  @Column({ name: 'result_url', type: 'text', nullable: true })
  resultUrl: string | null;

  @Column({ name: 'result_key', type: 'text', nullable: true })
  resultKey: string | null;

  /** 128 random bits, drawn at the first claim: the random part of the result's key, the same for every attempt. */
  @Column({ name: 'result_token', type: 'text', nullable: true })
  resultToken: string | null;

  @Column({ type: 'text', nullable: true })
  error: string | null;

  /** Why the task failed, for code to branch on (TaskErrorCode); null unless failed. */
  @Column({ name: 'error_code', type: 'text', nullable: true })
  errorCode: TaskErrorCode | null;

  /** Pixel size of the stored result as it really is (an upstream may map the asked size to another); null until succeeded. */
  @Column({ name: 'result_width', type: 'integer', nullable: true })
  resultWidth: number | null;

  @Column({ name: 'result_height', type: 'integer', nullable: true })
  resultHeight: number | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @Column({ name: 'started_at', type: 'timestamptz', nullable: true })
  startedAt: Date | null;

  /**
   * When the current attempt was handed to its provider; null while its worker still waits
   * for a model or render slot (a cancel takes such a task; see TaskStateStore.send).
   */
  @Column({ name: 'sent_at', type: 'timestamptz', nullable: true })
  sentAt: Date | null;

  /**
   * A queue upstream's id for the current request (routes of a queue type), written as soon as the
   * submit answers: a redelivery, a crash recovery or a retry after Kiln's own trouble
   * resumes it instead of paying for it again. Cleared only when the upstream fails it.
   * Shown to operators, never to account holders.
   */
  @Column({ name: 'upstream_request_id', type: 'text', nullable: true })
  upstreamRequestId: string | null;

  /** What polling and fetching the request needs (status and result URLs), as the route's type wrote it. */
  @Column({ name: 'upstream_handle', type: 'jsonb', nullable: true })
  upstreamHandle: Record<string, string> | null;

  @Column({ name: 'upstream_submitted_at', type: 'timestamptz', nullable: true })
  upstreamSubmittedAt: Date | null;

  /**
   * When a queue upstream's submit was about to be sent (committed before the call), until its
   * answer is known: with no request id after a crash, the upstream may have taken it
   * (libs/tasks submit-intent.store.ts). Null: no submit in doubt.
   */
  @Column({ name: 'submit_intent_at', type: 'timestamptz', nullable: true })
  submitIntentAt: Date | null;

  /** What finds that request again upstream (the type's lookup key), as the route's type wrote it. */
  @Column({ name: 'submit_intent', type: 'jsonb', nullable: true })
  submitIntent: Record<string, unknown> | null;

  /**
   * What the task's upstream calls cost the operator, in micro-dollars (its route's price for
   * what was made); null: a billed image no price covered (unpriced). Operators only.
   */
  @Column({
    name: 'upstream_cost_micros',
    type: 'bigint',
    nullable: true,
    default: 0,
    transformer: { to: (v: number | null) => v, from: (v: string | null) => (v === null ? null : Number(v)) },
  })
  upstreamCostMicros: number | null;

  /** The batch's tier, copied so the standard feeder's index never holds economy tasks (they wait for the collector). */
  @Column({ type: 'text', default: 'standard' })
  tier: BatchTier;

  /** The upstream batch (economy tier) the task was submitted in; null until then. */
  @Column({ name: 'upstream_batch_id', type: 'uuid', nullable: true })
  upstreamBatchId: string | null;

  @ManyToOne(() => UpstreamBatchEntity, { onDelete: 'SET NULL' })
  @JoinColumn({ name: 'upstream_batch_id', foreignKeyConstraintName: 'tasks_upstream_batch_fk' })
  upstreamBatch?: UpstreamBatchEntity;

  /**
   * Set while the task waits on its upstream in the pollers' hands (no worker holds it): not
   * polled before this time. Null otherwise.
   */
  @Column({ name: 'upstream_poll_at', type: 'timestamptz', nullable: true })
  upstreamPollAt: Date | null;

  /** The generator whose poller holds the waiting task, and until when (it renews; past it, another takes over). */
  @Column({ name: 'upstream_lease_until', type: 'timestamptz', nullable: true })
  upstreamLeaseUntil: Date | null;

  @Column({ name: 'upstream_poller', type: 'text', nullable: true })
  upstreamPoller: string | null;

  /**
   * A batch cancel asked of the upstream for this accepted request: `asked` (by the api),
   * `sending` (a generator is asking), `confirmed` (it did not run: the task is cancelled),
   * `unconfirmed` (it runs, ran, or the upstream did not say: the task finishes). Null: none.
   */
  @Column({ name: 'upstream_cancel', type: 'text', nullable: true })
  upstreamCancel: 'asked' | 'sending' | 'confirmed' | 'unconfirmed' | null;

  /** `asked`: not sent before this (an upstream's Retry-After), null at once; `sending`: the sender's lease ends. */
  @Column({ name: 'upstream_cancel_at', type: 'timestamptz', nullable: true })
  upstreamCancelAt: Date | null;

  /**
   * The route of its batch's chain (index into batches.routes) the task's attempts go to: it
   * moves on when an attempt fails with a failover kind; on a succeeded task, the route that
   * made the image.
   */
  @Column({ name: 'route_index', type: 'smallint', default: 0 })
  routeIndex: number;

  @Column({ name: 'finished_at', type: 'timestamptz', nullable: true })
  finishedAt: Date | null;

  @Column({ name: 'updated_at', type: 'timestamptz', default: () => 'now()' })
  updatedAt: Date;
}
