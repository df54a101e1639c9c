import { ApiProperty } from '@nestjs/swagger';
import { ModelEntity } from '@app/database';
import { CATALOG_DEFAULTS, CATALOG_LIMITS, economyOffer, orderedRatios, pricedResolutions } from '@app/catalog';

export class ModelDto {
  @ApiProperty({ example: 'alpha-image-2' }) key: string;
  @ApiProperty() displayName: string;
  @ApiProperty() blurb: string;
  @ApiProperty({ type: 'object', additionalProperties: { type: 'integer' }, example: { '1K': 5, '2K': 10 } })
  creditCost: Record<string, number>;
  @ApiProperty({
    type: 'object',
    nullable: true,
    additionalProperties: { type: 'integer' },
    example: { '1K': 3, '2K': 5 },
    description:
      'Credits per image on the economy tier (`tier: "economy"`), by resolution; null: the model has no economy tier. A resolution absent here has none',
  })
  economyCreditCost: Record<string, number> | null;
  @ApiProperty({
    type: 'integer',
    nullable: true,
    example: 24,
    description: 'Hours within which every task of an economy batch ends (its expiresAt); null when the model has no economy tier',
  })
  economyWindowHours: number | null;
  @ApiProperty({ type: [String] }) aspectRatios: string[];
  @ApiProperty({ type: [String] }) resolutions: string[];
  @ApiProperty({ type: 'object', additionalProperties: { type: 'array', items: { type: 'string' } } })
  resolutionsByRatio: Record<string, string[]>;
  @ApiProperty() supportsRefImages: boolean;
  @ApiProperty({ type: 'integer', nullable: true }) maxRefImages: number | null;
  @ApiProperty() supportsQuality: boolean;
  @ApiProperty() supportsBackground: boolean;
  @ApiProperty({ type: 'integer' }) maxPromptLength: number;

  static from(m: ModelEntity): ModelDto {
    const ratios = orderedRatios(m);
    const priced = pricedResolutions(m);
    const economy = economyOffer(m);
    return {
      key: m.key,
      displayName: m.displayName,
      blurb: m.blurb,
      creditCost: m.creditCost,
      economyCreditCost: economy ? economy.creditCost : null,
      economyWindowHours: economy ? economy.windowHours : null,
      aspectRatios: ratios,
      resolutions: priced,
      resolutionsByRatio: Object.fromEntries(ratios.map((r) => [r, priced.filter((res) => m.resolutionsByRatio[r].includes(res))])),
      supportsRefImages: m.supportsRefImages,
      maxRefImages: m.maxRefImages,
      supportsQuality: m.supportsQuality,
      supportsBackground: m.supportsBackground,
      maxPromptLength: m.maxPromptLength,
    };
  }
}

export class CatalogResponseDto {
  @ApiProperty({ type: [ModelDto] }) models: ModelDto[];
  @ApiProperty({ type: 'object', additionalProperties: true, example: CATALOG_DEFAULTS })
  defaults: typeof CATALOG_DEFAULTS;
  @ApiProperty({ type: 'object', additionalProperties: true, example: CATALOG_LIMITS })
  limits: typeof CATALOG_LIMITS;

  static from(models: ModelEntity[]): CatalogResponseDto {
    return { models: models.map((m) => ModelDto.from(m)), defaults: CATALOG_DEFAULTS, limits: CATALOG_LIMITS };
  }
}
