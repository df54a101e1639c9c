import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import { ApiConflictResponse, ApiCreatedResponse, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { BatchesService, BatchPolling } from '@app/batches';
import { decodeCursor, parseLimit } from '@app/database';
import { AuthenticatedKey } from '@app/keys';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { ErrorResponseDto } from '../common/error.response.dto';
import { BatchListQueryDto } from './dto/batch-list.query.dto';
import { ApiBatchPoll, answerPoll } from './batch-poll';
import { BatchDto, BatchListResponseDto, CreatedBatchResponseDto } from './dto/batch.response.dto';
import { CreateBatchRequestDto } from './dto/create-batch.request.dto';

@ApiTags('Public API')
@Controller('batches')
export class BatchesController {
  constructor(
    private readonly batches: BatchesService,
    private readonly polling: BatchPolling,
  ) {}

  @Post()
  @ApiKeyAuth('batches:write')
  @ApiOperation({ summary: 'Create a batch: charges total x creditCost[resolution] up front and returns at once' })
  @ApiCreatedResponse({ type: CreatedBatchResponseDto })
  @ApiResponse({ status: 402, description: 'insufficient_credits, daily_credit_cap_exceeded', type: ErrorResponseDto })
  async create(@CurrentKey() auth: AuthenticatedKey, @Body() body: CreateBatchRequestDto): Promise<CreatedBatchResponseDto> {
    const batch = await this.batches.create({ accountId: auth.account.id, apiKeyId: auth.key.id, via: 'api' }, body);
    return CreatedBatchResponseDto.from(batch);
  }

  @Get()
  @ApiKeyAuth('batches:read')
  @ApiOperation({ summary: 'List batches, newest first (keyset pagination)' })
  @ApiOkResponse({ type: BatchListResponseDto })
  async list(@CurrentKey() auth: AuthenticatedKey, @Query() q: BatchListQueryDto): Promise<BatchListResponseDto> {
    return BatchListResponseDto.from(await this.batches.list(auth.account.id, parseLimit(q.limit), decodeCursor(q.cursor)));
  }

  @Get(':id')
  @ApiKeyAuth('batches:read')
  @ApiOperation({
    operationId: 'getBatch',
    summary: 'Poll a batch: its counts, done flag and tasks; conditional (If-None-Match) and long (Prefer: wait=N)',
  })
  @ApiBatchPoll()
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async detail(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    await answerPoll(this.polling, req, res, { accountId: auth.account.id, batchId: id, holder: `key:${auth.key.id}` });
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @ApiKeyAuth('batches:write')
  @ApiOperation({
    operationId: 'cancelBatch',
    summary: 'Cancel a batch: every task not yet sent to its provider is cancelled and refunded; sent ones finish',
  })
  @ApiOkResponse({ type: BatchDto, description: 'The batch after the cancel (again, unchanged, for a batch already cancelled)' })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  @ApiConflictResponse({ description: 'batch_not_cancellable: the batch finished without a cancel', type: ErrorResponseDto })
  async cancel(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string): Promise<BatchDto> {
    return BatchDto.from(await this.batches.cancel(auth.account.id, id));
  }
}
