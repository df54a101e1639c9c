import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString } from 'class-validator';

/** Kept as strings: parseLimit/decodeCursor give the precise invalid_request details. */
export class BatchListQueryDto {
  @ApiPropertyOptional({ type: 'integer', minimum: 1, maximum: 100, default: 20 })
  @IsOptional()
  @IsString()
  limit?: string;

  @ApiPropertyOptional({ description: "Opaque; the previous page's nextCursor" })
  @IsOptional()
  @IsString()
  cursor?: string;
}
