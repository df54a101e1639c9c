import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayMaxSize, ArrayMinSize, IsArray, IsIn, IsInt, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import {
  BACKGROUND_PATTERN,
  BATCH_TIERS,
  COUNT_PER_COMBO,
  CreateBatchInput,
  MAX_NOTE_LENGTH,
  MAX_PROMPTS,
  OUTPUT_FORMATS,
  Quality,
  QUALITIES,
  REF_MODES,
  SEED_MAX,
} from '@app/batches';
import type { BatchTier, OutputFormat, RefMode, Resolution } from '@app/database';
import { ASPECT_RATIO_PATTERN, RESOLUTIONS } from '@app/geometry';

/**
 * Body of `POST /v1/batches` (docs/api.md#batch-creation-request). Types, enums and ranges are checked here;
 * the per-prompt rules (non-blank, no U+0000, reported as `prompts[i]`) and the
 * refMode/refImages pairing are checked by the batches lib right after, still as step 2.
 */
export class CreateBatchRequestDto implements CreateBatchInput {
  // class-validator runs a property's decorators bottom-up and the pipe stops at the first
  // failure, so the type check sits lowest: `"x"` is reported as isArray, not arrayMaxSize.

  @ApiProperty({
    type: [String],
    minItems: 1,
    maxItems: MAX_PROMPTS,
    description: 'The batch fans out across every prompt. Each must be non-empty after trimming and free of U+0000.',
    example: ['a red fox in the snow', 'a lighthouse at dusk'],
  })
  @ArrayMaxSize(MAX_PROMPTS)
  @ArrayMinSize(1)
  @IsString({ each: true })
  @IsArray()
  prompts: string[];

  @ApiProperty({ description: 'A model key from GET /v1/models', example: 'eta-image' })
  @IsString()
  model: string;

  @ApiPropertyOptional({
    default: '1:1',
    pattern: ASPECT_RATIO_PATTERN.source,
    description: "Must be legal at the resolution per the model's resolutionsByRatio",
    example: '16:9',
  })
  @IsOptional()
  @Matches(ASPECT_RATIO_PATTERN)
  @IsString()
  aspectRatio?: string;

  @ApiPropertyOptional({ enum: RESOLUTIONS, default: '1K' })
  @IsOptional()
  @IsIn(RESOLUTIONS)
  resolution?: Resolution;

  @ApiPropertyOptional({
    type: 'integer',
    minimum: COUNT_PER_COMBO.min,
    maximum: COUNT_PER_COMBO.max,
    default: 1,
    description: 'Images per prompt; per reference image when refMode is "each"',
  })
  @IsOptional()
  @Max(COUNT_PER_COMBO.max)
  @Min(COUNT_PER_COMBO.min)
  @IsInt()
  countPerCombo?: number;

  @ApiPropertyOptional({ enum: REF_MODES, default: 'none', description: 'How reference images pair with prompts' })
  @IsOptional()
  @IsIn(REF_MODES)
  refMode?: RefMode;

  @ApiPropertyOptional({
    type: [String],
    default: [],
    description: 'URLs returned by POST /v1/uploads to this account. Required (non-empty) unless refMode is "none", and empty when it is.',
  })
  @IsOptional()
  @IsString({ each: true })
  @IsArray()
  refImages?: string[];

  @ApiPropertyOptional({ enum: QUALITIES, default: 'auto', description: 'Honoured only by models whose supportsQuality is true' })
  @IsOptional()
  @IsIn(QUALITIES)
  quality?: Quality;

  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    pattern: BACKGROUND_PATTERN.source,
    description: 'BETA. "transparent" or "#RRGGBB"; omitted or null = auto. Honoured only by models whose supportsBackground is true.',
    example: 'transparent',
  })
  @IsOptional()
  @Matches(BACKGROUND_PATTERN)
  @IsString()
  background?: string | null;

  @ApiPropertyOptional({
    type: 'string',
    nullable: true,
    maxLength: MAX_NOTE_LENGTH,
    description: 'Free-text label shown in the dashboard',
  })
  @IsOptional()
  @MaxLength(MAX_NOTE_LENGTH)
  @IsString()
  note?: string | null;

  @ApiPropertyOptional({
    type: 'integer',
    nullable: true,
    minimum: 0,
    maximum: SEED_MAX,
    description:
      'Task n (1-based, in fan-out order) renders with seed + n - 1 (wrapping past 2^31-1 to 0), passed to models whose upstream takes a seed; the same seed and request make the same batch again. Omitted or null: seeds drawn from the batch id.',
    example: 42,
  })
  @IsOptional()
  @Max(SEED_MAX)
  @Min(0)
  @IsInt()
  seed?: number | null;

  @ApiPropertyOptional({
    enum: OUTPUT_FORMATS,
    default: 'png',
    description: 'The format the images are stored and served in; result file names end in .png, .jpg or .webp',
  })
  @IsOptional()
  @IsIn(OUTPUT_FORMATS)
  outputFormat?: OutputFormat;

  @ApiPropertyOptional({
    enum: BATCH_TIERS,
    default: 'standard',
    description:
      "standard: rendered as soon as a generator has room, at creditCost. economy: at the model's economyCreditCost (about half), run through its upstream's batch API; every task ends within the model's economyWindowHours (the batch's expiresAt). A model (or resolution) without economy prices: 400 tier_not_available",
    example: 'standard',
  })
  @IsOptional()
  @IsIn(BATCH_TIERS)
  tier?: BatchTier;

  @ApiPropertyOptional({
    type: 'integer',
    nullable: true,
    description:
      'Unix milliseconds, later than now and at most 7 days ahead; not allowed with tier "economy". Tasks not yet sent to their upstream by then are cancelled and refunded, as a cancel would; tasks already running finish. Omitted or null: no deadline.',
  })
  @IsOptional()
  @IsInt()
  deadline?: number | null;
}
