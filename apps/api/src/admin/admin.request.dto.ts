import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  IsArray,
  IsBoolean,
  IsEmail,
  IsIn,
  IsInt,
  IsNotEmpty,
  IsObject,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  NotEquals,
  ValidateIf,
} from 'class-validator';
import { ECONOMY_WINDOW_HOURS, MAX_IMAGES_PER_BATCH, MAX_OPENAI_ALIASES, MAX_REF_IMAGES, OPENAI_MODEL_NAME } from '@app/catalog';
import type { ProviderRoute, Resolution } from '@app/database';
import { ACCOUNT_STATUSES } from '@app/database';
import { FAILOVER_DEFAULTS, FAILOVER_KINDS, MAX_ROUTES, routeShapes } from '@app/providers';
import type { FailoverSettings } from '@app/providers';

const PLANS = ['free', 'starter', 'studio', 'scale'] as const;

export class CreateAccountRequestDto {
  @ApiProperty({ example: 'ops@example.com' })
  @IsEmail()
  @MaxLength(254)
  email: string;

  @ApiPropertyOptional({ minLength: 10, example: 'correct-horse-battery' })
  @IsOptional()
  @IsString()
  @MinLength(10)
  @MaxLength(200)
  password?: string;

  @ApiProperty({ enum: PLANS })
  @IsIn(PLANS)
  plan: (typeof PLANS)[number];

  @ApiPropertyOptional({ type: 'integer', minimum: 0 })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(1_000_000_000)
  credits?: number;
}

export class UpdateAccountRequestDto {
  @ApiPropertyOptional({ enum: PLANS })
  @IsOptional()
  @IsIn(PLANS)
  plan?: (typeof PLANS)[number];

  @ApiPropertyOptional({ enum: ACCOUNT_STATUSES })
  @IsOptional()
  @IsIn(['active', 'disabled'])
  status?: 'active' | 'disabled';
}

export class CreditsRequestDto {
  @ApiProperty({ type: 'integer', description: 'Positive grants, negative adjusts down; never below zero' })
  @IsInt()
  @NotEquals(0)
  @Min(-1_000_000_000)
  @Max(1_000_000_000)
  amount: number;

  @ApiProperty({ maxLength: 500 })
  @IsString()
  @IsNotEmpty()
  @MaxLength(500)
  reason: string;
}

export class UpdateModelRequestDto {
  @ApiPropertyOptional({ maxLength: 100 })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(100)
  displayName?: string;

  @ApiPropertyOptional({ maxLength: 500 })
  @IsOptional()
  @IsString()
  @MaxLength(500)
  blurb?: string;

  @ApiPropertyOptional({ type: 'object', additionalProperties: { type: 'integer' } })
  @IsOptional()
  @IsObject()
  creditCost?: Partial<Record<Resolution, number>>;

  @ApiPropertyOptional({
    type: 'object',
    nullable: true,
    additionalProperties: { type: 'integer' },
    example: { '1K': 3 },
    description:
      'Credits per image on the economy tier by resolution (positive integers; resolutions a subset of creditCost\'s); needs economyWindowHours and a route with batch { "enabled": true }. null: no economy tier',
  })
  @IsOptional()
  @IsObject()
  economyCreditCost?: Partial<Record<Resolution, number>> | null;

  @ApiPropertyOptional({
    type: 'integer',
    nullable: true,
    minimum: ECONOMY_WINDOW_HOURS.min,
    maximum: ECONOMY_WINDOW_HOURS.max,
    example: 24,
    description: "Hours within which every task of an economy batch ends (the batch's expiresAt); required with economyCreditCost",
  })
  // Decorators run bottom-up: the type check first, so text is reported as isInt.
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @Max(ECONOMY_WINDOW_HOURS.max)
  @Min(ECONOMY_WINDOW_HOURS.min)
  @IsInt()
  economyWindowHours?: number | null;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: { type: 'array', items: { type: 'string' } },
    description:
      "The model's own pairs (ratio -> resolutions), offered as given: each must be priced and made honestly by the route (else route_cannot_make)",
  })
  @IsOptional()
  @IsObject()
  resolutionsByRatio?: Record<string, Resolution[]>;

  @ApiPropertyOptional()
  @IsOptional()
  @IsBoolean()
  enabled?: boolean;

  @ApiPropertyOptional() @IsOptional() @IsBoolean() supportsRefImages?: boolean;
  @ApiPropertyOptional() @IsOptional() @IsBoolean() supportsQuality?: boolean;
  @ApiPropertyOptional() @IsOptional() @IsBoolean() supportsBackground?: boolean;

  @ApiPropertyOptional({
    type: 'integer',
    nullable: true,
    maximum: MAX_REF_IMAGES,
    description: `null: no declared cap (the ceiling of ${MAX_REF_IMAGES} applies)`,
  })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsInt()
  @Min(0)
  @Max(MAX_REF_IMAGES)
  maxRefImages?: number | null;

  @ApiPropertyOptional({ type: 'integer' })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(100_000)
  maxPromptLength?: number;

  @ApiPropertyOptional({
    type: 'object',
    additionalProperties: true,
    description: `${routeShapes()}; or { preset: "<id>", ...settings that override it } (GET /v1/admin/providers), stored expanded; the model then offers its own pairs that the preset makes (a route without a preset must make them all); maxConcurrency: concurrent upstream calls for the model across all generators (default MODEL_CONCURRENCY_CAP)`,
  })
  @IsOptional()
  @IsObject()
  provider?: ProviderRoute;

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'object', additionalProperties: true },
    maxItems: MAX_ROUTES,
    example: [{ preset: 'openai/gpt-image-1' }, { type: 'openai', baseUrl: 'https://gateway.example.com/v1', model: 'gpt-image-1' }],
    description: `A chain of routes, first the primary, each what provider takes (presets included); at most ${MAX_ROUTES}. A task whose attempt fails with a failover kind (failover.on) tries the next route. provider is the one-route shorthand (routes: [provider]); give one or the other. Refusals name the route: routes[1].baseUrl`,
  })
  @IsOptional()
  @IsArray()
  routes?: ProviderRoute[];

  @ApiPropertyOptional({
    type: 'object',
    properties: {
      on: {
        type: 'array',
        items: { type: 'string', enum: [...FAILOVER_KINDS] },
        description: 'Failure kinds that move a task to the next route',
      },
      cooldownMs: {
        type: 'integer',
        minimum: 1000,
        maximum: 3_600_000,
        description: 'How long an open circuit keeps tasks from its route before one probe',
      },
      failuresToOpen: { type: 'integer', minimum: 1, maximum: 1000, description: "Failures in a row that open a route's circuit" },
      sizes: {
        type: 'string',
        enum: ['all', 'primary'],
        description:
          "all: offer a pair every route makes; primary: one the first makes (fallbacks that cannot make a task's pair are skipped)",
      },
    },
    example: { ...FAILOVER_DEFAULTS },
    description: 'Failover settings, each over the current one (defaults: every kind, cooldownMs 60000, failuresToOpen 5, sizes all)',
  })
  @IsOptional()
  @IsObject()
  failover?: Partial<FailoverSettings>;

  @ApiPropertyOptional({
    type: 'array',
    items: { type: 'string', pattern: OPENAI_MODEL_NAME.source },
    maxItems: MAX_OPENAI_ALIASES,
    example: ['gpt-image-1'],
    description:
      "OpenAI model names the OpenAI-compatible door (POST /v1/images/generations, /edits) accepts for this model; unique across models and never a model key; [] clears. Kiln's own API takes only the key",
  })
  @IsOptional()
  @IsArray()
  openaiAliases?: string[];
}

export class CreateModelRequestDto extends UpdateModelRequestDto {
  @ApiProperty({
    example: 'studio-flash',
    pattern: '^[a-z0-9][a-z0-9._-]{0,63}$',
    description: 'What clients pass as `model`; never changes',
  })
  @IsString()
  @Matches(/^[a-z0-9][a-z0-9._-]{0,63}$/)
  key: string;

  @ApiProperty({ maxLength: 100 })
  @IsString()
  @IsNotEmpty()
  @MaxLength(100)
  declare displayName: string;

  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' }, example: { '1K': 4, '2K': 8 } })
  @IsObject()
  declare creditCost: Partial<Record<Resolution, number>>;

  @ApiPropertyOptional({
    example: 'gemini/gemini-3.1-flash-image',
    description: 'Take the pairs (those at priced resolutions), caps, supports and route from this preset, unless set here',
  })
  @IsOptional()
  @IsString()
  fromPreset?: string;
}

export class UpdatePlanRequestDto {
  @ApiPropertyOptional() @IsOptional() @IsBoolean() apiAccess?: boolean;
  @ApiPropertyOptional({ type: 'integer' }) @IsOptional() @IsInt() @Min(0) @Max(1000) maxKeys?: number;
  @ApiPropertyOptional({ type: 'integer' }) @IsOptional() @IsInt() @Min(1) @Max(MAX_IMAGES_PER_BATCH) maxImagesPerBatch?: number;
  @ApiPropertyOptional({ type: 'integer' }) @IsOptional() @IsInt() @Min(1) @Max(10_000) maxConcurrentBatches?: number;
  @ApiPropertyOptional({
    type: 'integer',
    minimum: 0,
    maximum: 10_000,
    description: 'Economy batches not done at once; 0 turns the economy tier off for the plan',
  })
  @IsOptional()
  @IsInt()
  @Min(0)
  @Max(10_000)
  maxConcurrentEconomyBatches?: number;
  @ApiPropertyOptional({ type: 'integer' }) @IsOptional() @IsInt() @Min(1) @Max(10_000_000) requestsPerMinute?: number;
}

export class ListQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
  @IsOptional()
  @Type(() => String)
  @IsString()
  limit?: string;

  @ApiPropertyOptional()
  @IsOptional()
  @IsString()
  cursor?: string;
}
