import { Check, Column, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { FailoverSettings, ProviderRoute } from '@app/providers';

// The resolution tiers belong to the geometry lib.
export type { Resolution } from '@app/geometry';
import type { Resolution } from '@app/geometry';

// The routing type belongs to the providers lib (type-only import: no runtime dependency).
export type { ProviderRoute };

@Check('models_routes_chain', `jsonb_typeof("routes") = 'array' AND jsonb_array_length("routes") BETWEEN 1 AND 5`)
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

  /**
   * Aspect ratio -> legal resolutions, as offered: the model's own pairs that its route makes
   * honestly, written by the catalog with every edit. The only source of legal sizes.
   */
  @Column({ name: 'resolutions_by_ratio', type: 'jsonb' })
  resolutionsByRatio: Record<string, Resolution[]>;

  /**
   * The model's own pairs, as the operator (or its preset at creation) gave them, kept apart
   * from what its route offers: routing to a narrower route and back restores them.
   */
  @Column({ name: 'own_resolutions_by_ratio', type: 'jsonb' })
  ownResolutionsByRatio: Record<string, Resolution[]>;

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

  /** The first route of the chain (every reader of one route uses it); always routes[0] when routes is set. */
  @Column({ type: 'jsonb' })
  provider: ProviderRoute;

  /** The chain of routes a task fails over along (at most 5, the first is `provider`); null: `provider` alone. */
  @Column({ type: 'jsonb', nullable: true })
  routes: ProviderRoute[] | null;

  /** When a task moves to the next route, and each route's circuit; null: the defaults (libs/providers failover.ts). */
  @Column({ type: 'jsonb', nullable: true })
  failover: FailoverSettings | null;

  /** OpenAI model names (gpt-image-1...) the OpenAI-compatible door accepts for this model; unique across models. */
  @Column({ name: 'openai_aliases', type: 'text', array: true, default: () => "'{}'" })
  openaiAliases: string[];

  @Column({ name: 'sort_order', type: 'integer' })
  sortOrder: number;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
