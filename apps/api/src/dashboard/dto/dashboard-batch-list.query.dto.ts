import { ApiPropertyOptional } from '@nestjs/swagger';
import { IsOptional, IsString } from 'class-validator';
import { BATCH_STATUSES } from '@app/database';
import { MAX_SEARCH_LENGTH } from '@app/batches';
import { BatchListQueryDto } from '../../batches/dto/batch-list.query.dto';

/** The dashboard's list filters, kept as strings: parseBatchFilter gives the precise invalid_request details. */
export class DashboardBatchListQueryDto extends BatchListQueryDto {
  @ApiPropertyOptional({ description: `Comma-separated statuses (${BATCH_STATUSES.join(', ')}); any of them`, example: 'failed,partial' })
  @IsOptional()
  @IsString()
  status?: string;

  @ApiPropertyOptional({ description: 'A model key', example: 'eta-image' })
  @IsOptional()
  @IsString()
  model?: string;

  @ApiPropertyOptional({ description: 'Created at or after: a UTC day (YYYY-MM-DD) or an ISO 8601 instant', example: '2026-11-01' })
  @IsOptional()
  @IsString()
  from?: string;

  @ApiPropertyOptional({ description: 'Created before: an instant, or a UTC day (then through its end)', example: '2026-11-28' })
  @IsOptional()
  @IsString()
  to?: string;

  @ApiPropertyOptional({
    description: `Text the note or a prompt contains, any case (1 to ${MAX_SEARCH_LENGTH} characters)`,
    example: 'lighthouse',
  })
  @IsOptional()
  @IsString()
  q?: string;
}
