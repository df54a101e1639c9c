import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { BatchesService } from '@app/batches';
import { decodeCursor, parseLimit } from '@app/database';
import { AuthenticatedKey } from '@app/keys';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { ErrorResponseDto } from '../common/error.response.dto';
import { BatchListQueryDto } from './dto/batch-list.query.dto';
import { BatchDetailResponseDto, BatchListResponseDto, CreatedBatchResponseDto } from './dto/batch.response.dto';
import { CreateBatchRequestDto } from './dto/create-batch.request.dto';

@ApiTags('Public API')
@Controller('batches')
export class BatchesController {
  constructor(private readonly batches: BatchesService) {}

  @Post()
  @ApiKeyAuth('batches:write')
  @ApiOperation({ operationId: 'createBatch', summary: 'Create a batch: charges total x creditCost[resolution] up front and returns at once' })
  @ApiCreatedResponse({ type: CreatedBatchResponseDto })
  @ApiResponse({ status: 402, description: 'insufficient_credits, daily_credit_cap_exceeded', type: ErrorResponseDto })
  async create(@CurrentKey() auth: AuthenticatedKey, @Body() body: CreateBatchRequestDto): Promise<CreatedBatchResponseDto> {
    const batch = await this.batches.create({ accountId: auth.account.id, apiKeyId: auth.key.id, via: 'api' }, body);
    return CreatedBatchResponseDto.from(batch);
  }

  @Get()
  @ApiKeyAuth('batches:read')
  @ApiOperation({ operationId: 'listBatches', summary: 'List batches, newest first (keyset pagination)' })
  @ApiOkResponse({ type: BatchListResponseDto })
  async list(@CurrentKey() auth: AuthenticatedKey, @Query() q: BatchListQueryDto): Promise<BatchListResponseDto> {
    return BatchListResponseDto.from(await this.batches.list(auth.account.id, parseLimit(q.limit), decodeCursor(q.cursor)));
  }

  @Get(':id')
  @ApiKeyAuth('batches:read')
  @ApiOperation({ operationId: 'getBatch', summary: 'Poll a batch: its counts, done flag and tasks' })
  @ApiOkResponse({ type: BatchDetailResponseDto })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async detail(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string): Promise<BatchDetailResponseDto> {
    return BatchDetailResponseDto.from(await this.batches.detail(auth.account.id, id));
  }
}
