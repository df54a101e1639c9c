import { ApiProperty } from '@nestjs/swagger';
import { ArrayMaxSize, IsArray, IsString } from 'class-validator';
import { BatchDetailResponseDto, TaskDto } from '../batches/dto/batch.response.dto';
import { KeyDto } from '../common/key.response.dto';

/** A task as its owner sees it, plus what only operators see. */
export class AdminTaskDto extends TaskDto {
  @ApiProperty({
    type: 'string',
    nullable: true,
    description: "The queue upstream's request id (fal, Replicate, BFL) for the task's current attempt, to look it up upstream; null for other routes",
  })
  upstreamRequestId: string | null;
}

/** A batch as its owner polls it, plus whose it is and each task's upstream request id. */
export class AdminBatchResponseDto extends BatchDetailResponseDto {
  @ApiProperty({ format: 'uuid' }) accountId: string;
  @ApiProperty({ type: [AdminTaskDto], description: 'In fan-out order: prompt, then reference image, then copy' })
  declare tasks: AdminTaskDto[];
}

export class AdminKeyDto extends KeyDto {
  @ApiProperty({ format: 'uuid' }) accountId: string;
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
  @IsArray() @ArrayMaxSize(10_000) @IsString({ each: true })
  terms: string[];
}
