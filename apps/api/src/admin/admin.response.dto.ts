import { ApiProperty, ApiPropertyOptional, ApiPropertyOptions } from '@nestjs/swagger';
import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { PLAN_KEYS } from '@app/database';
import { RESOLUTIONS } from '@app/geometry';
import { AccountDto } from '../common/account.response.dto';
import { FAILOVER_DEFAULTS, FAILOVER_KINDS, PROVIDER_TYPE_NAMES, RETIREMENT_WARNING_DAYS, routeTypesInBrief } from '@app/providers';

/*
 * Wire shapes of the operator routes that answer catalog and plan rows as stored. Documented
 * here so the OpenAPI document describes every answer; the controllers' output is unchanged.
 */

export class AdminAccountListResponseDto {
  @ApiProperty({ type: [AccountDto] }) accounts: AccountDto[];
  @ApiProperty({ type: 'string', nullable: true, description: 'Pass as `cursor` for the next page; null on the last page' })
  nextCursor: string | null;
}

export class AdminModelDto {
  @ApiProperty({ example: 'eta-image' }) key: string;
  @ApiProperty({ example: 'Eta Image' }) displayName: string;
  @ApiProperty() blurb: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'integer' },
    example: { '1K': 5, '2K': 10 },
    description: 'Credits per image by resolution; a resolution absent here is not offered',
  })
  creditCost: Record<string, number>;
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: { type: 'integer' },
    example: { '1K': 3 },
    description:
      "Credits per image on the economy tier by resolution, as stored; null: no economy tier. Offered to clients only while the route's batch.enabled is true",
  })
  economyCreditCost: Record<string, number> | null;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    example: 24,
    description: 'Hours within which an economy batch ends; kept (unused) when economyCreditCost is null',
  })
  economyWindowHours: number | null;
  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string', enum: [...RESOLUTIONS] } },
    example: { '1:1': ['1K', '2K'] },
    description: "What clients are offered (GET /v1/models): the model's own pairs that its route makes honestly",
  })
  resolutionsByRatio: Record<string, string[]>;
  @ApiProperty({
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string', enum: [...RESOLUTIONS] } },
    example: { '1:1': ['1K', '2K'] },
    description:
      "The model's own pairs, as last set (resolutionsByRatio in an edit, or the preset at creation): kept when a route narrows the offer, offered again when the model is routed back",
  })
  ownResolutionsByRatio: Record<string, string[]>;
  @ApiProperty() supportsRefImages: boolean;
  @ApiProperty({ type: 'integer', nullable: true }) maxRefImages: number | null;
  @ApiProperty() supportsQuality: boolean;
  @ApiProperty() supportsBackground: boolean;
  @ApiProperty({ type: 'integer' }) maxPromptLength: number;
  @ApiProperty() enabled: boolean;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    required: ['type'],
    properties: { type: { type: 'string', enum: PROVIDER_TYPE_NAMES } },
    example: { type: 'builtin' },
    description: `Provider routing: ${routeTypesInBrief()}`,
  })
  provider: Record<string, unknown>;
  @ApiProperty({
    type: 'array',
    items: {
      type: 'object',
      additionalProperties: true,
      required: ['type'],
      properties: { type: { type: 'string', enum: PROVIDER_TYPE_NAMES } },
    },
    example: [{ type: 'builtin' }],
    description: 'The chain of routes, first the primary (routes[0] is provider); one route when the model has no fallback',
  })
  routes: Record<string, unknown>[];
  @ApiProperty({
    type: 'object',
    required: ['on', 'cooldownMs', 'failuresToOpen', 'sizes'],
    properties: {
      on: { type: 'array', items: { type: 'string', enum: [...FAILOVER_KINDS] } },
      cooldownMs: { type: 'integer' },
      failuresToOpen: { type: 'integer' },
      sizes: { type: 'string', enum: ['all', 'primary'] },
    },
    example: { ...FAILOVER_DEFAULTS },
    description: 'Failover settings in force (the defaults unless edited)',
  })
  failover: Record<string, unknown>;
  @ApiProperty({
    type: [String],
    example: ['gpt-image-1'],
    description: 'OpenAI model names the OpenAI-compatible door accepts for this model; empty when none',
  })
  openaiAliases: string[];
  @ApiProperty({ type: 'integer' }) sortOrder: number;
  @ApiProperty({ format: 'date-time', example: '2026-11-25T09:30:00.000Z' }) updatedAt: string;
}

const PAIR: SchemaObject = {
  type: 'object',
  properties: { aspectRatio: { type: 'string', example: '16:9' }, resolution: { type: 'string', example: '2K' } },
};

/** What the operator should act on about a model's route (docs/admin.md "Route warnings"). */
const ROUTE_WARNINGS: ApiPropertyOptions = {
  type: 'array',
  items: {
    type: 'object',
    required: ['code', 'message'],
    properties: {
      code: { type: 'string', enum: ['preset_retired', 'preset_retiring', 'unpriced', 'no_margin'] },
      preset: { type: 'string', example: 'openai/gpt-image-1-mini', description: 'preset_retired, preset_retiring' },
      retiresAt: { type: 'string', format: 'date', example: '2026-12-01', description: 'preset_retired, preset_retiring' },
      pairs: {
        type: 'array',
        items: PAIR,
        description:
          'unpriced: the offered pairs nothing prices; no_margin: the pairs priced at or above the charge (each with its marginUsd)',
      },
      marginUsd: {
        type: 'number',
        example: 0,
        description: 'no_margin: the lowest margin among the pairs (credits x CREDIT_VALUE_USD - upstream price)',
      },
      message: { type: 'string' },
    },
  },
  description: `Things to act on about the route: its preset's upstream model retired, or retires within ${RETIREMENT_WARNING_DAYS} days; pairs it offers that it cannot price (unpriced) or prices at or above what the model charges (no_margin). Empty when none`,
};

/** A model as GET /v1/admin/models lists it: with its route's health as the generators report it. */
export class AdminModelWithHealthDto extends AdminModelDto {
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    required: ['state'],
    properties: {
      state: { type: 'string', enum: ['ok', 'not_configured', 'failing', 'unknown'] },
      lastSuccessAt: { type: 'string', format: 'date-time', nullable: true, description: 'ok' },
      missing: { type: 'array', items: { type: 'string' }, description: 'not_configured: the variables the generators lack' },
      lastError: { type: 'string', description: 'failing' },
      errorCode: { type: 'string', nullable: true, description: 'failing' },
      status: { type: 'integer', nullable: true, description: 'failing: the upstream HTTP status' },
      lastErrorAt: { type: 'string', format: 'date-time', description: 'failing' },
      reason: { type: 'string', description: 'unknown' },
    },
    example: { state: 'ok', lastSuccessAt: '2026-01-31T12:00:00.000Z' },
  })
  routeHealth: Record<string, unknown>;

  @ApiProperty({
    type: 'array',
    items: {
      type: 'object',
      required: ['index', 'type', 'health', 'circuit'],
      properties: {
        index: { type: 'integer', example: 0 },
        type: { type: 'string', enum: PROVIDER_TYPE_NAMES },
        health: { type: 'object', additionalProperties: true, description: 'As routeHealth, for this route' },
        circuit: {
          type: 'object',
          required: ['state'],
          properties: {
            state: { type: 'string', enum: ['closed', 'half_open', 'open', 'unknown'] },
            failures: { type: 'integer', description: 'Failures in a row so far' },
            openUntil: { type: 'string', format: 'date-time', nullable: true, description: 'open: when one probe may go' },
          },
        },
      },
    },
    description: "Each route of the chain with its health and its circuit as the generators share it (routeHealth is routes[0]'s)",
  })
  routesHealth: Record<string, unknown>[];

  @ApiProperty(ROUTE_WARNINGS)
  routeWarnings: Record<string, unknown>[];
}

export class AdminModelListResponseDto {
  @ApiProperty({ type: [AdminModelWithHealthDto] }) models: AdminModelWithHealthDto[];
}

export class AdminModelResponseDto {
  @ApiProperty({ type: AdminModelDto }) model: AdminModelDto;
  @ApiProperty(ROUTE_WARNINGS) routeWarnings: Record<string, unknown>[];
}

export class PlanDto {
  @ApiProperty({ enum: PLAN_KEYS }) key: string;
  @ApiProperty() apiAccess: boolean;
  @ApiProperty({ type: 'integer' }) maxKeys: number;
  @ApiProperty({ type: 'integer', example: 10 }) maxImagesPerBatch: number;
  @ApiProperty({ type: 'integer', example: 1, description: 'Standard batches not done at once' }) maxConcurrentBatches: number;
  @ApiProperty({
    type: 'integer',
    example: 2,
    description: 'Economy batches not done at once (they do not count toward maxConcurrentBatches); 0: no economy tier on the plan',
  })
  maxConcurrentEconomyBatches: number;
  @ApiProperty({ type: 'integer', example: 120, description: 'Per API key' }) requestsPerMinute: number;
}

export class PlanListResponseDto {
  @ApiProperty({ type: [PlanDto] }) plans: PlanDto[];
}

export class PlanResponseDto {
  @ApiProperty({ type: PlanDto }) plan: PlanDto;
}

export class QueueStatsDto {
  @ApiProperty({ example: 'kiln-tasks' }) name: string;
  @ApiProperty({ type: 'integer' }) waiting: number;
  @ApiProperty({ type: 'integer' }) active: number;
  @ApiProperty({ type: 'integer' }) delayed: number;
  @ApiProperty({ type: 'integer' }) failed: number;
  @ApiProperty({ type: 'integer' }) completed: number;
  @ApiProperty({ type: 'integer', description: 'Tasks in PostgreSQL not yet handed to the queue' }) pending: number;
}

export class QueuesResponseDto {
  @ApiProperty({ type: [QueueStatsDto] }) queues: QueueStatsDto[];
}

/** docs/admin.md "Usage and margin": one group of the operator's usage report. */
export class OperatorUsageRowDto {
  @ApiPropertyOptional({ description: 'UTC day, YYYY-MM-DD (groupBy=day)' }) day?: string;
  @ApiPropertyOptional({ type: 'string', nullable: true, description: 'Model key (groupBy=model)' }) model?: string | null;
  @ApiPropertyOptional({ format: 'uuid', example: '9b2f6c1e-4d3a-4f8e-b1a7-2c5d8e9f0a12', description: 'Account id (groupBy=account)' })
  accountId?: string;
  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    example: 'fal/fal-ai/flux/dev',
    description: "The route that made the tasks (groupBy=route): its preset, else '<type>/<model>', else its type",
  })
  route?: string | null;
  @ApiPropertyOptional({
    type: 'string',
    format: 'uuid',
    nullable: true,
    description: 'The API key that created the batches (groupBy=key); null: made without one (dashboard)',
  })
  apiKeyId?: string | null;
  @ApiProperty({ type: 'integer', description: 'Tasks that succeeded in the window' }) images: number;
  @ApiProperty({ type: 'integer', description: 'Tasks that failed for good (refunded) in the window' }) failed: number;
  @ApiProperty({
    type: 'integer',
    description: 'Tasks whose upstream-billed image no price covered (recorded unpriced, never at $0): upstreamCostUsd leaves them out',
  })
  unpricedImages: number;
  @ApiProperty({ type: 'integer', description: 'Credits charged (ledger batch_charge rows written in the window)' }) creditsCharged: number;
  @ApiProperty({ type: 'integer', description: 'Credits refunded (ledger refund rows written in the window)' }) creditsRefunded: number;
  @ApiProperty({
    description: "What the window's ended tasks cost upstream, at their routes' prices for what was made (unpriced images left out)",
  })
  upstreamCostUsd: number;
  @ApiProperty({ description: '(creditsCharged - creditsRefunded) x CREDIT_VALUE_USD' }) revenueUsd: number;
  @ApiProperty({ description: 'revenueUsd - upstreamCostUsd' }) marginUsd: number;
}

export class OperatorUsageResponseDto {
  @ApiProperty({ type: [OperatorUsageRowDto] }) rows: OperatorUsageRowDto[];
}

export class ProviderSettingDto {
  @ApiProperty({ example: 'baseUrl' }) name: string;
  @ApiProperty() required: boolean;
  @ApiPropertyOptional({
    description: 'Applied when the route omits the setting (a string, number, boolean or object, as the setting is)',
    oneOf: [{ type: 'string' }, { type: 'number' }, { type: 'boolean' }, { type: 'object', additionalProperties: true }],
    example: 30000,
  })
  default?: unknown;
  @ApiProperty() description: string;
}

export class ProviderTypeDto {
  @ApiProperty({ enum: PROVIDER_TYPE_NAMES }) type: string;
  @ApiProperty({ enum: ['sync', 'queue'], description: 'sync: one exchange answers the image; queue: submitted, then polled' })
  mode: string;
  @ApiProperty() summary: string;
  @ApiProperty({
    type: 'string',
    nullable: true,
    description: 'The environment variable the key comes from by default (apiKeyEnv overrides); null: no key',
  })
  keyVariable: string | null;
  @ApiProperty({ type: [ProviderSettingDto] }) settings: ProviderSettingDto[];
}

export class ProviderPresetDto {
  @ApiProperty({ example: 'openai/gpt-image-1', description: '<type>/<upstream model id>' }) id: string;
  @ApiProperty({ enum: PROVIDER_TYPE_NAMES }) type: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'The route settings the preset expands to',
    example: { model: 'gpt-image-1' },
  })
  settings: Record<string, unknown>;
  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description:
      "The upstream's price: rule (how it bills, in its own units; a route by this preset takes it as its price setting), readOn (the day it was read), source (the vendor's page), unconfirmed (figures its page did not show), a note; and, derived from the rule for a 1:1 image, usdPerImage by resolution and economyUsdPerImage (its batch API's price, for types with one)",
    example: {
      rule: { per: 'megapixel', usd: 0.025, rounding: 'up' },
      readOn: '2026-11-28',
      source: 'https://vendor.example/pricing',
      usdPerImage: { '1K': 0.025 },
    },
  })
  cost?: Record<string, unknown>;
  @ApiPropertyOptional({
    description: 'The price rule in one line, with the day it was read and its source',
    example: 'USD 0.025 per megapixel, rounded up (fal, read 2026-11-28, https://vendor.example/pricing)',
  })
  price?: string;
  @ApiPropertyOptional({ format: 'date', example: '2026-12-01', description: 'When the upstream announced it stops serving the model' })
  retiresAt?: string;
  @ApiPropertyOptional() notes?: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description:
      'What a model created fromPreset takes: resolutionsByRatio (the pairs it makes honestly), maxRefImages, supportsRefImages, supportsQuality, supportsBackground',
  })
  model: Record<string, unknown>;
}

export class ProvidersResponseDto {
  @ApiProperty({ type: [ProviderTypeDto] }) types: ProviderTypeDto[];
  @ApiProperty({ type: [ProviderPresetDto] }) presets: ProviderPresetDto[];
}
