import { ApiProperty, ApiPropertyOptional, OmitType } from '@nestjs/swagger';
import { Type } from 'class-transformer';
import { IsEmail, IsInt, IsNotEmpty, IsOptional, IsString, Matches, Max, MaxLength, Min, MinLength, ValidateIf } from 'class-validator';
import { CreateKeyRequestDto } from '../../common/key.request.dto';

export const PASSWORD_MIN = 10;
export const PASSWORD_MAX = 200;

export class SignupRequestDto {
  @ApiProperty({ example: 'you@example.com', description: 'Compared case-insensitively' })
  @IsEmail()
  @MaxLength(254)
  email: string;

  @ApiProperty({ minLength: PASSWORD_MIN, maxLength: PASSWORD_MAX, example: 'correct-horse-battery' })
  @IsString()
  @MinLength(PASSWORD_MIN)
  @MaxLength(PASSWORD_MAX)
  password: string;
}

/** No minimum length here: a short password simply does not match. */
export class LoginRequestDto {
  @ApiProperty({ example: 'you@example.com' })
  @IsEmail()
  @MaxLength(254)
  email: string;

  @ApiProperty({ maxLength: PASSWORD_MAX, example: 'correct-horse-battery' })
  @IsString()
  @IsNotEmpty()
  @MaxLength(PASSWORD_MAX)
  password: string;
}

/** The admin key body with `name` required: the holder names each key they make. */
export class DashboardCreateKeyRequestDto extends OmitType(CreateKeyRequestDto, ['name'] as const) {
  @ApiProperty({ maxLength: 100 })
  @IsString()
  @MinLength(1)
  @MaxLength(100)
  @Matches(/\S/, { message: 'name must not be blank' })
  name: string;
}

export class UsageQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 366, default: 30 })
  @IsOptional()
  @Type(() => String)
  @IsString()
  days?: string;
}

export class LedgerQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
  @IsOptional()
  @Type(() => String)
  @IsString()
  limit?: string;

  @ApiPropertyOptional({ description: 'nextCursor of the previous page' })
  @IsOptional()
  @IsString()
  cursor?: string;
}

export class UpdateDashboardAccountRequestDto {
  @ApiProperty({ type: 'integer', nullable: true, minimum: 1, description: 'The credits.low alert line; null: no alert' })
  @ValidateIf((_, v) => v !== null)
  @IsInt()
  @Min(1)
  @Max(Number.MAX_SAFE_INTEGER)
  lowCreditsThreshold: number | null;
}
