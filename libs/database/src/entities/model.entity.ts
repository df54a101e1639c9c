import { Column, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { ProviderRoute } from '@app/providers';

// The resolution tiers belong to the geometry lib.
export type { Resolution } from '@app/geometry';
import type { Resolution } from '@app/geometry';

// The routing type belongs to the providers lib (type-only import: no runtime dependency).
export type { ProviderRoute };

@Entity({ name: 'models' })
export class ModelEntity {
  @PrimaryColumn({ type: 'text' })
  key: string;

  @Column({ name: 'display_name', type: 'text' })
  displayName: string;

  @Column({ type: 'text' })
  blurb: string;

  /** Resolution -> credits per image. A resolution absent here is not offered. */
  @Column({ name: 'credit_cost', type: 'jsonb' })
  creditCost: Partial<Record<Resolution, number>>;

  /** Resolution -> credits per image on the economy tier (priced resolutions a subset of creditCost's); null: no economy tier. */
  @Column({ name: 'economy_credit_cost', type: 'jsonb', nullable: true })
  economyCreditCost: Partial<Record<Resolution, number>> | null;

  /** Hours within which an economy batch's tasks all end (the upstream batch window); null when no economy tier. */
  @Column({ name: 'economy_window_hours', type: 'integer', nullable: true })
  economyWindowHours: number | null;

  /** Aspect ratio -> legal resolutions: the only source of legal sizes. */
  @Column({ name: 'resolutions_by_ratio', type: 'jsonb' })
  resolutionsByRatio: Record<string, Resolution[]>;

  @Column({ name: 'supports_ref_images', type: 'boolean' })
  supportsRefImages: boolean;

  @Column({ name: 'max_ref_images', type: 'integer', nullable: true })
  maxRefImages: number | null;

  @Column({ name: 'supports_quality', type: 'boolean' })
  supportsQuality: boolean;

  @Column({ name: 'supports_background', type: 'boolean' })
  supportsBackground: boolean;

  @Column({ name: 'max_prompt_length', type: 'integer', default: 4000 })
  maxPromptLength: number;

  @Column({ type: 'boolean', default: true })
  enabled: boolean;

  @Column({ type: 'jsonb' })
  provider: ProviderRoute;

  @Column({ name: 'sort_order', type: 'integer' })
  sortOrder: number;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
