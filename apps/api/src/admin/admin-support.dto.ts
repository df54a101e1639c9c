import { ApiProperty } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsString } from 'class-validator';
import { BatchDetailResponseDto, TaskDto } from '../batches/dto/batch.response.dto';
import { KeyDto } from '../common/key.response.dto';

/** A task as its owner sees it, plus what only operators see. */
export class AdminTaskDto extends TaskDto {
  @ApiProperty({
    type: 'string',
    nullable: true,
    description:
      "The request id a queue upstream (a route of a queue type) gave the task's current attempt, to look it up upstream; null for other routes",
  })
  upstreamRequestId: string | null;

  @ApiProperty({
    type: 'object',
    nullable: true,
    required: ['index', 'type'],
    properties: { index: { type: 'integer', example: 1 }, type: { type: 'string', example: 'openai' } },
    description:
      "The route of the batch's chain (index: its place, 0 the first; type: its type) that made the image; for a task not succeeded, the route its attempts go to",
  })
  route: { index: number; type: string } | null;
}

/** A batch as its owner polls it, plus whose it is and each task's upstream request id. */
export class AdminBatchResponseDto extends BatchDetailResponseDto {
  @ApiProperty({ format: 'uuid', example: '9b2f6c1e-4d3a-4f8e-b1a7-2c5d8e9f0a12' }) accountId: string;
  @ApiProperty({ type: [AdminTaskDto], description: 'In fan-out order: prompt, then reference image, then copy' })
  declare tasks: AdminTaskDto[];
}

export class AdminKeyDto extends KeyDto {
  @ApiProperty({ format: 'uuid', example: '9b2f6c1e-4d3a-4f8e-b1a7-2c5d8e9f0a12' }) accountId: string;
}

export class AdminKeyListResponseDto {
  @ApiProperty({ type: [AdminKeyDto], description: 'One key for an id; every key with that hint for a hint' })
  keys: AdminKeyDto[];
}

export class AdminKeyResponseDto {
  @ApiProperty({ type: AdminKeyDto }) key: AdminKeyDto;
}

export class ContentPolicyDto {
  @ApiProperty({
    type: [String],
    example: ['csam', 'child porn'],
    description: 'Blocked terms, whole words, case-insensitive; multi-word terms match across spaces and punctuation',
  })
  terms: string[];
}

export class ContentPolicyRequestDto {
  @ApiProperty({ type: [String], example: ['csam', 'child porn'], description: 'The whole new list (replaces the old one)' })
  @IsArray()
  @ArrayMaxSize(10_000)
  @IsString({ each: true })
  terms: string[];
}
