import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import {
  ArrayMaxSize,
  ArrayMinSize,
  ArrayUnique,
  IsArray,
  IsIn,
  IsOptional,
  IsString,
  MaxLength,
  MinLength,
  ValidateIf,
} from 'class-validator';
import { WEBHOOK_EVENT_TYPES, WebhookEventType } from '@app/webhooks';

export class CreateWebhookRequestDto {
  @ApiProperty({ maxLength: 2048, example: 'https://example.com/kiln-webhooks', description: 'https, on a public address' })
  @IsString()
  @MinLength(1)
  @MaxLength(2048)
  url: string;

  @ApiPropertyOptional({ enum: WEBHOOK_EVENT_TYPES, isArray: true, default: ['batch.completed'] })
  @IsOptional()
  @IsArray()
  @ArrayMinSize(1)
  @ArrayMaxSize(WEBHOOK_EVENT_TYPES.length)
  @ArrayUnique()
  @IsIn(WEBHOOK_EVENT_TYPES, { each: true })
  events?: WebhookEventType[];

  @ApiPropertyOptional({ type: 'string', nullable: true, maxLength: 200 })
  @IsOptional()
  @ValidateIf((_, v) => v !== null)
  @IsString()
  @MaxLength(200)
  description?: string | null;
}

/** Kept as strings: parseLimit/decodeCursor give the precise invalid_request details. */
export class WebhookDeliveriesQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
  @IsOptional()
  @IsString()
  limit?: string;

  @ApiPropertyOptional({ description: "Opaque; the previous page's nextCursor" })
  @IsOptional()
  @IsString()
  cursor?: string;
}
