import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';
import { ErrorCode } from '@app/errors';

export class ErrorObjectDto {
  @ApiProperty({ enum: ErrorCode })
  code: ErrorCode;

  @ApiProperty()
  message: string;

  @ApiPropertyOptional({ type: 'object', additionalProperties: true })
  details?: Record<string, unknown>;
}

export class ErrorResponseDto {
  @ApiProperty({ type: ErrorObjectDto })
  error: ErrorObjectDto;
}
