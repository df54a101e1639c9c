import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { PLAN_KEYS } from '@app/database';
import { RESOLUTIONS } from '@app/geometry';
import { AccountDto } from '../common/account.response.dto';
import { PROVIDER_TYPE_NAMES, RETIREMENT_WARNING_DAYS, routeTypesInBrief } from '@app/providers';

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
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' }, example: { '1K': 5, '2K': 10 }, description: 'Credits per image by resolution; a resolution absent here is not offered' })
  creditCost: Record<string, number>;
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: { type: 'integer' },
    example: { '1K': 3 },
    description: "Credits per image on the economy tier by resolution, as stored; null: no economy tier. Offered to clients only while the route's batch.enabled is true",
  })
  economyCreditCost: Record<string, number> | null;
  @ApiProperty({ type: 'integer', nullable: true, example: 24, description: 'Hours within which an economy batch ends; kept (unused) when economyCreditCost is null' })
  economyWindowHours: number | null;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'array', items: { type: 'string', enum: [...RESOLUTIONS] } }, example: { '1:1': ['1K', '2K'] } })
  resolutionsByRatio: Record<string, string[]>;
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
  @ApiProperty({ type: 'integer' }) sortOrder: number;
  @ApiProperty({ format: 'date-time', example: '2026-11-25T09:30:00.000Z' }) updatedAt: string;
}

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
      required: ['code', 'preset', 'retiresAt', 'message'],
      properties: {
        code: { type: 'string', enum: ['preset_retired', 'preset_retiring'] },
        preset: { type: 'string', example: 'openai/gpt-image-1-mini' },
        retiresAt: { type: 'string', format: 'date', example: '2026-12-01' },
        message: { type: 'string' },
      },
    },
    description: `Things to act on about the route: its preset's upstream model retired, or retires within ${RETIREMENT_WARNING_DAYS} days. Empty when none`,
  })
  routeWarnings: Record<string, unknown>[];
}

export class AdminModelListResponseDto {
  @ApiProperty({ type: [AdminModelWithHealthDto] }) models: AdminModelWithHealthDto[];
}

export class AdminModelResponseDto {
  @ApiProperty({ type: AdminModelDto }) model: AdminModelDto;
}

export class PlanDto {
  @ApiProperty({ enum: PLAN_KEYS }) key: string;
  @ApiProperty() apiAccess: boolean;
  @ApiProperty({ type: 'integer' }) maxKeys: number;
  @ApiProperty({ type: 'integer', example: 10 }) maxImagesPerBatch: number;
  @ApiProperty({ type: 'integer', example: 1, description: 'Standard batches not done at once' }) maxConcurrentBatches: number;
  @ApiProperty({ type: 'integer', example: 2, description: 'Economy batches not done at once (they do not count toward maxConcurrentBatches); 0: no economy tier on the plan' })
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
  @ApiPropertyOptional({ format: 'uuid', example: '9b2f6c1e-4d3a-4f8e-b1a7-2c5d8e9f0a12', description: 'Account id (groupBy=account)' }) accountId?: string;
  @ApiProperty({ type: 'integer', description: 'Tasks that succeeded in the window' }) images: number;
  @ApiProperty({ type: 'integer', description: 'Tasks that failed for good (refunded) in the window' }) failed: number;
  @ApiProperty({ type: 'integer', description: 'Credits charged (ledger batch_charge rows written in the window)' }) creditsCharged: number;
  @ApiProperty({ type: 'integer', description: 'Credits refunded (ledger refund rows written in the window)' }) creditsRefunded: number;
  @ApiProperty({ description: "What the window's ended tasks cost upstream, at their routes' list prices (route cost)" }) upstreamCostUsd: number;
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
  @ApiProperty({ enum: ['sync', 'queue'], description: 'sync: one exchange answers the image; queue: submitted, then polled' }) mode: string;
  @ApiProperty() summary: string;
  @ApiProperty({ type: 'string', nullable: true, description: 'The environment variable the key comes from by default (apiKeyEnv overrides); null: no key' })
  keyVariable: string | null;
  @ApiProperty({ type: [ProviderSettingDto] }) settings: ProviderSettingDto[];
}

export class ProviderPresetDto {
  @ApiProperty({ example: 'openai/gpt-image-1', description: '<type>/<upstream model id>' }) id: string;
  @ApiProperty({ enum: PROVIDER_TYPE_NAMES }) type: string;
  @ApiProperty({ type: 'object', additionalProperties: true, description: 'The route settings the preset expands to', example: { model: 'gpt-image-1' } })
  settings: Record<string, unknown>;
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: "The upstream's list price: usdPerImage by resolution, readOn (the day it was read) and a note; a route by this preset takes usdPerImage as its cost", example: { usdPerImage: { '1K': 0.042 }, readOn: '2026-11-20' } })
  cost?: Record<string, unknown>;
  @ApiPropertyOptional({ format: 'date', example: '2026-12-01', description: 'When the upstream announced it stops serving the model' }) retiresAt?: string;
  @ApiPropertyOptional() notes?: string;
  @ApiProperty({
    type: 'object',
    additionalProperties: true,
    description: 'What a model created fromPreset takes: resolutionsByRatio (the pairs it makes honestly), maxRefImages, supportsRefImages, supportsQuality, supportsBackground',
  })
  model: Record<string, unknown>;
}

export class ProvidersResponseDto {
  @ApiProperty({ type: [ProviderTypeDto] }) types: ProviderTypeDto[];
  @ApiProperty({ type: [ProviderPresetDto] }) presets: ProviderPresetDto[];
}
