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
  @ApiProperty({ format: 'date-time' }) updatedAt: string;
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
  @ApiProperty({ type: 'integer', example: 1 }) maxConcurrentBatches: number;
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

export class ProviderSettingDto {
  @ApiProperty({ example: 'baseUrl' }) name: string;
  @ApiProperty() required: boolean;
  @ApiPropertyOptional({ description: 'Applied when the route omits the setting', example: 30000 }) default?: unknown;
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
  @ApiPropertyOptional({ type: 'object', additionalProperties: true, description: "The upstream's list price: usdPerImage by resolution, and a note", example: { usdPerImage: { '1K': 0.042 } } })
  cost?: Record<string, unknown>;
  @ApiPropertyOptional({ format: 'date', description: 'When the upstream announced it stops serving the model' }) retiresAt?: string;
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
