import { Body, Controller, Get, HttpCode, Param, Post, Query, Req, Res } from '@nestjs/common';
import {
  ApiConflictResponse,
  ApiCreatedResponse,
  ApiNotFoundResponse,
  ApiOkResponse,
  ApiOperation,
  ApiProduces,
  ApiResponse,
  ApiTags,
} from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { BatchArchiveService, BatchEvents, BatchesService, BatchPolling, keyActor } from '@app/batches';
import { IdempotentRequest } from '@app/idempotency';
import { decodeCursor, parseLimit } from '@app/database';
import { AuthenticatedKey } from '@app/keys';
import { ApiKeyAuth, CurrentKey } from '../auth/auth.decorators';
import { ErrorResponseDto } from '../common/error.response.dto';
import { sendArchive } from './batch-archive.response';
import { BatchListQueryDto } from './dto/batch-list.query.dto';
import { ApiBatchPoll, answerPoll } from './batch-poll';
import { ApiBatchEvents, streamEvents } from './batch-events.response';
import { BatchDto, BatchEstimateResponseDto, BatchListResponseDto, CreatedBatchResponseDto } from './dto/batch.response.dto';
import { CreateBatchRequestDto } from './dto/create-batch.request.dto';
import { ApiIdempotentCreate, Idempotency, IDEMPOTENT_REPLAYED_HEADER } from './idempotency.decorators';

@ApiTags('Public API')
@Controller('batches')
export class BatchesController {
  constructor(
    private readonly batches: BatchesService,
    private readonly archives: BatchArchiveService,
    private readonly polling: BatchPolling,
    private readonly eventStreams: BatchEvents,
  ) {}

  @Post()
  @ApiKeyAuth('batches:write')
  @ApiOperation({
    operationId: 'createBatch',
    summary: 'Create a batch: charges total x creditCost[resolution] up front and returns at once',
  })
  @ApiIdempotentCreate()
  @ApiCreatedResponse({ type: CreatedBatchResponseDto, headers: IDEMPOTENT_REPLAYED_HEADER })
  @ApiResponse({ status: 402, description: 'insufficient_credits, daily_credit_cap_exceeded', type: ErrorResponseDto })
  @ApiResponse({
    status: 403,
    description: "key_budget_exceeded, model_not_allowed (the key's budget or models allowlist)",
    type: ErrorResponseDto,
  })
  async create(
    @CurrentKey() auth: AuthenticatedKey,
    @Body() body: CreateBatchRequestDto,
    @Idempotency('POST /v1/batches') idempotency: IdempotentRequest | null,
    @Res({ passthrough: true }) res: Response,
  ): Promise<CreatedBatchResponseDto> {
    const { created, replayed } = await this.batches.createOnce(keyActor(auth), body, idempotency);
    if (replayed) res.setHeader('Idempotent-Replayed', 'true');
    return CreatedBatchResponseDto.from(created);
  }

  @Post('estimate')
  @HttpCode(200)
  @ApiKeyAuth('batches:read')
  @ApiOperation({
    operationId: 'estimateBatch',
    summary:
      'Price a batch without creating it: the body of POST /v1/batches, the same refusals for checks 1-6, then what create would answer now',
  })
  @ApiOkResponse({ type: BatchEstimateResponseDto })
  async estimate(@CurrentKey() auth: AuthenticatedKey, @Body() body: CreateBatchRequestDto): Promise<BatchEstimateResponseDto> {
    return BatchEstimateResponseDto.from(await this.batches.estimate(keyActor(auth), body));
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
  @ApiOperation({
    operationId: 'getBatch',
    summary: 'Poll a batch: its counts, done flag and tasks; conditional (If-None-Match) and long (Prefer: wait=N)',
  })
  @ApiBatchPoll()
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async detail(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    await answerPoll(this.polling, req, res, { accountId: auth.account.id, batchId: id, holder: `key:${auth.key.id}` });
  }

  @Get(':id/events')
  @ApiKeyAuth('batches:read')
  @ApiOperation({
    operationId: 'streamBatchEvents',
    summary: "Follow a batch as Server-Sent Events: each task's final state, the batch's counts, until done; resumable with Last-Event-ID",
  })
  @ApiBatchEvents()
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async events(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string, @Req() req: Request, @Res() res: Response): Promise<void> {
    await streamEvents(this.eventStreams, req, res, { accountId: auth.account.id, batchId: id, holder: `key:${auth.key.id}` });
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @ApiKeyAuth('batches:write')
  @ApiOperation({
    operationId: 'cancelBatch',
    summary:
      'Cancel a batch: every task not yet sent to its provider is cancelled and refunded; tasks fal or Replicate accepted are asked of them (counts.cancelling) and refunded if they never ran; other sent ones finish',
  })
  @ApiOkResponse({ type: BatchDto, description: 'The batch after the cancel (again, unchanged, for a batch already cancelled)' })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  @ApiConflictResponse({ description: 'batch_not_cancellable: the batch finished without a cancel', type: ErrorResponseDto })
  async cancel(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string): Promise<BatchDto> {
    return BatchDto.from(await this.batches.cancel(auth.account.id, id));
  }

  @Get(':id/archive')
  @ApiKeyAuth('batches:read')
  @ApiOperation({
    operationId: 'downloadBatchArchive',
    summary: "A zip of the batch's images (images/0001-<prompt slug>.png, ...) and manifest.json, streamed; works while the batch runs",
  })
  @ApiProduces('application/zip')
  @ApiOkResponse({
    description: 'The zip (Content-Disposition: attachment; filename="kiln-<id>.zip")',
    schema: { type: 'string', format: 'binary' },
  })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async archive(@CurrentKey() auth: AuthenticatedKey, @Param('id') id: string, @Res() res: Response): Promise<void> {
    await sendArchive(this.archives, await this.archives.open(auth.account.id, id), res);
  }
}
