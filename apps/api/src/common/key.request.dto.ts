import { ApiPropertyOptional } from '@nestjs/swagger';
import { ArrayUnique, IsArray, IsIn, IsInt, IsOptional, IsString, Max, MaxLength, Min, MinLength, ValidateIf } from 'class-validator';
import { INT4_MAX } from '@app/database';
import { ALL_SCOPES, Scope } from '@app/keys';

export class CreateKeyRequestDto {
  @ApiPropertyOptional({ maxLength: 100 })
  @IsOptional() @IsString() @MinLength(1) @MaxLength(100)
  name?: string;

  @ApiPropertyOptional({ enum: ALL_SCOPES, isArray: true, description: 'Defaults to every scope' })
  @IsOptional() @IsArray() @ArrayUnique() @IsIn(ALL_SCOPES, { each: true })
  scopes?: Scope[];

  @ApiPropertyOptional({ type: 'integer', nullable: true, minimum: 1, maximum: INT4_MAX })
  @IsOptional() @ValidateIf((_, v) => v !== null) @IsInt() @Min(1) @Max(INT4_MAX)
  creditCapPerDay?: number | null;
}

export class UpdateKeyRequestDto {
  @ApiPropertyOptional({ maxLength: 100 })
  @IsOptional() @IsString() @MinLength(1) @MaxLength(100)
  name?: string;

  @ApiPropertyOptional({ type: 'integer', nullable: true, minimum: 1, maximum: INT4_MAX, description: 'null clears the cap' })
  @IsOptional() @ValidateIf((_, v) => v !== null) @IsInt() @Min(1) @Max(INT4_MAX)
  creditCapPerDay?: number | null;

  @ApiPropertyOptional({ enum: ALL_SCOPES, isArray: true })
  @IsOptional() @IsArray() @ArrayUnique() @IsIn(ALL_SCOPES, { each: true })
  scopes?: Scope[];
}
