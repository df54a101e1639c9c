import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import {
  ArrayMaxSize,
  ArrayUnique,
  IsArray,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Matches,
  Max,
  MaxLength,
  Min,
  MinLength,
  ValidateIf,
  ValidateNested,
} from 'class-validator';
import { BUDGET_PERIODS, BudgetPeriod } from '@app/billing';
import { INT4_MAX } from '@app/database';
import { ALL_SCOPES, Scope } from '@app/keys';

/** A key's budget: credits per UTC calendar period (docs/billing.md#per-key-budgets). */
export class KeyBudgetRequestDto {
  @ApiProperty({ type: 'integer', minimum: 1, maximum: INT4_MAX })
  @IsInt()
  @Min(1)
  @Max(INT4_MAX)
  credits: number;

  @ApiProperty({ enum: BUDGET_PERIODS, description: 'UTC day, ISO week (from Monday 00:00 UTC) or calendar month' })
  @IsIn(BUDGET_PERIODS)
  period: BudgetPeriod;
}

/** A model key as the catalog spells it. */
const MODEL_KEY = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,99}$/;

/** The budget and allowlist fields, the same on creation and update. */
class KeyLimitsRequestDto {
  @ApiPropertyOptional({
    type: 'integer',
    nullable: true,
    minimum: 1,
    maximum: INT4_MAX,
    description: 'A day budget, in its v1 spelling; null clears it',
  })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsInt()
  @Min(1)
  @Max(INT4_MAX)
  creditCapPerDay?: number | null;

  @ApiPropertyOptional({ type: KeyBudgetRequestDto, nullable: true, description: 'null clears it; not with creditCapPerDay' })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @ValidateNested()
  @Type(() => KeyBudgetRequestDto)
  budget?: KeyBudgetRequestDto | null;

  @ApiPropertyOptional({ type: [String], maxItems: 100, description: 'Model keys this key may use; [] allows every model' })
  @IsOptional()
  @IsArray()
  @ArrayMaxSize(100)
  @IsString({ each: true })
  @Matches(MODEL_KEY, { each: true })
  models?: string[];
}

export class CreateKeyRequestDto extends KeyLimitsRequestDto {
  @ApiPropertyOptional({ maxLength: 100 })
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  name?: string;

  @ApiPropertyOptional({ enum: ALL_SCOPES, isArray: true, description: 'Defaults to every scope' })
  @IsOptional()
  @IsArray()
  @ArrayUnique()
  @IsIn(ALL_SCOPES, { each: true })
  scopes?: Scope[];
}

export class UpdateKeyRequestDto extends KeyLimitsRequestDto {
  @ApiPropertyOptional({ maxLength: 100 })
  @IsOptional()
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  name?: string;

  @ApiPropertyOptional({ enum: ALL_SCOPES, isArray: true })
  @IsOptional()
  @IsArray()
  @ArrayUnique()
  @IsIn(ALL_SCOPES, { each: true })
  scopes?: Scope[];
}
