import { Column, Entity, PrimaryColumn } from 'typeorm';

export const PLAN_KEYS = ['free', 'starter', 'studio', 'scale'] as const;
export type PlanKey = (typeof PLAN_KEYS)[number];

@Entity({ name: 'plans' })
export class PlanEntity {
  @PrimaryColumn({ type: 'text' })
  key: PlanKey;

  @Column({ name: 'api_access', type: 'boolean' })
  apiAccess: boolean;

  @Column({ name: 'max_keys', type: 'integer' })
  maxKeys: number;

  @Column({ name: 'max_images_per_batch', type: 'integer' })
  maxImagesPerBatch: number;

  @Column({ name: 'max_concurrent_batches', type: 'integer' })
  maxConcurrentBatches: number;

  /** Active economy batches at once; economy batches do not count toward maxConcurrentBatches. */
  @Column({ name: 'max_concurrent_economy_batches', type: 'integer', default: 0 })
  maxConcurrentEconomyBatches: number;

  /** Requests per minute per API key, shared by every api replica through Redis. */
  @Column({ name: 'requests_per_minute', type: 'integer' })
  requestsPerMinute: number;
}
