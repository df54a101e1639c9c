import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { Transform } from 'class-transformer';
import { IsBoolean, IsInt, IsNotEmpty, IsOptional, IsString, Matches, Max, MaxLength, Min } from 'class-validator';
import type { CreditPackEntity } from '@app/database';

const MAX_CREDITS = 1_000_000_000;
/** Stripe's largest unit_amount (eight digits). */
const MAX_PRICE = 99_999_999;
const lowerCase = ({ value }: { value: unknown }) => (typeof value === 'string' ? value.toLowerCase() : value);

/** A credit pack on the wire (admin and dashboard alike). */
export class CreditPackDto {
  @ApiProperty({ format: 'uuid', example: '3f6c2a9e-8b1d-4c5e-9f7a-1b2c3d4e5f60' }) id: string;
  @ApiProperty({ example: '1,000 credits', description: 'What Checkout shows the buyer' }) name: string;
  @ApiProperty({ type: 'integer', example: 1000 }) credits: number;
  @ApiProperty({ type: 'integer', example: 1000, description: "The price in the currency's smallest unit (cents; yen for JPY)" })
  priceCents: number;
  @ApiProperty({ example: 'usd', description: 'ISO 4217, lower case' }) currency: string;
  @ApiProperty({ description: 'On sale; false once archived' }) active: boolean;
  @ApiProperty({ description: 'Unix ms' }) createdAt: number;

  static from(p: CreditPackEntity): CreditPackDto {
    return {
      id: p.id,
      name: p.name,
      credits: p.credits,
      priceCents: p.priceCents,
      currency: p.currency,
      active: p.active,
      createdAt: p.createdAt.getTime(),
    };
  }
}

export class CreditPackResponseDto {
  @ApiProperty({ type: CreditPackDto }) pack: CreditPackDto;
}

export class CreditPackListResponseDto {
  @ApiProperty({ type: [CreditPackDto], description: 'Cheapest first' }) packs: CreditPackDto[];
}

export class CreateCreditPackRequestDto {
  @ApiProperty({ type: 'integer', minimum: 1, maximum: MAX_CREDITS, example: 1000 })
  @IsInt()
  @Min(1)
  @Max(MAX_CREDITS)
  credits: number;

  @ApiProperty({
    type: 'integer',
    minimum: 1,
    maximum: MAX_PRICE,
    example: 1000,
    description: "In the currency's smallest unit (cents; yen for JPY). Stripe refuses charges under its minimum (0.50 USD)",
  })
  @IsInt()
  @Min(1)
  @Max(MAX_PRICE)
  priceCents: number;

  @ApiProperty({ example: 'usd', description: 'ISO 4217 (any case; stored lower case)' })
  @Transform(lowerCase)
  @IsString()
  @Matches(/^[a-z]{3}$/, { message: 'currency must be a three-letter ISO 4217 code' })
  currency: string;

  @ApiPropertyOptional({ maxLength: 100, description: 'Shown at Checkout; default "<credits> credits"' })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(100)
  name?: string;

  @ApiPropertyOptional({ default: true })
  @IsOptional()
  @IsBoolean()
  active?: boolean;
}

export class UpdateCreditPackRequestDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_CREDITS })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MAX_CREDITS)
  credits?: number;

  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: MAX_PRICE })
  @IsOptional()
  @IsInt()
  @Min(1)
  @Max(MAX_PRICE)
  priceCents?: number;

  @ApiPropertyOptional({ example: 'eur' })
  @IsOptional()
  @Transform(lowerCase)
  @IsString()
  @Matches(/^[a-z]{3}$/, { message: 'currency must be a three-letter ISO 4217 code' })
  currency?: string;

  @ApiPropertyOptional({ maxLength: 100 })
  @IsOptional()
  @IsString()
  @IsNotEmpty()
  @MaxLength(100)
  name?: string;

  @ApiPropertyOptional({ description: 'false takes the pack off sale (as DELETE does); true puts it back' })
  @IsOptional()
  @IsBoolean()
  active?: boolean;
}
