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
import { pipeline } from 'node:stream/promises';
import { BatchArchiveService, BatchEvents, BatchesService, BatchPolling, parseBatchFilter, TaskFileService } from '@app/batches';
import { IdempotentRequest } from '@app/idempotency';
import { decodeCursor, parseLimit } from '@app/database';
import type { AuthenticatedSession } from '@app/sessions';
import { sendArchive } from '../batches/batch-archive.response';
import { ApiBatchPoll, answerPoll } from '../batches/batch-poll';
import { ApiBatchEvents, streamEvents } from '../batches/batch-events.response';
import { BatchDto, BatchEstimateResponseDto, BatchListResponseDto, CreatedBatchResponseDto } from '../batches/dto/batch.response.dto';
import { CreateBatchRequestDto } from '../batches/dto/create-batch.request.dto';
import { ApiIdempotentCreate, Idempotency, IDEMPOTENT_REPLAYED_HEADER } from '../batches/idempotency.decorators';
import { ErrorResponseDto } from '../common/error.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';
import { DashboardBatchListQueryDto } from './dto/dashboard-batch-list.query.dto';

/**
 * The public batch endpoints for a signed-in holder: same body, rules, code and wire shapes,
 * only the actor differs. No key means no daily key cap; the plan's limits still apply, on
 * every plan (the free plan's lack of API access concerns keys, not the dashboard).
 */
@ApiTags('Dashboard')
@SessionAuth()
@ApiResponse({ status: 400, description: 'invalid_request and the other validation codes of POST /v1/batches', type: ErrorResponseDto })
@Controller('dashboard/batches')
export class DashboardBatchesController {
  constructor(
    private readonly batches: BatchesService,
    private readonly archives: BatchArchiveService,
    private readonly files: TaskFileService,
    private readonly polling: BatchPolling,
    private readonly eventStreams: BatchEvents,
  ) {}

  @Post()
  @ApiOperation({
    operationId: 'createDashboardBatch',
    summary: 'Create a batch from the dashboard (createdViaApi: false); charged up front like POST /v1/batches',
  })
  @ApiIdempotentCreate()
  @ApiCreatedResponse({ type: CreatedBatchResponseDto, headers: IDEMPOTENT_REPLAYED_HEADER })
  @ApiResponse({ status: 402, description: 'insufficient_credits', type: ErrorResponseDto })
  @ApiResponse({ status: 403, description: 'batch_limit_exceeded, concurrent_limit_exceeded, account_disabled', type: ErrorResponseDto })
  async create(
    @CurrentSession() auth: AuthenticatedSession,
    @Body() body: CreateBatchRequestDto,
    @Idempotency('POST /v1/dashboard/batches') idempotency: IdempotentRequest | null,
    @Res({ passthrough: true }) res: Response,
  ): Promise<CreatedBatchResponseDto> {
    const { created, replayed } = await this.batches.createOnce(
      { accountId: auth.account.id, apiKeyId: null, via: 'dashboard' },
      body,
      idempotency,
    );
    if (replayed) res.setHeader('Idempotent-Replayed', 'true');
    return CreatedBatchResponseDto.from(created);
  }

  @Post('estimate')
  @HttpCode(200)
  @ApiOperation({
    operationId: 'estimateDashboardBatch',
    summary: 'Price a batch without creating it, as POST /v1/batches/estimate (no key, so no daily cap)',
  })
  @ApiOkResponse({ type: BatchEstimateResponseDto })
  async estimate(@CurrentSession() auth: AuthenticatedSession, @Body() body: CreateBatchRequestDto): Promise<BatchEstimateResponseDto> {
    return BatchEstimateResponseDto.from(
      await this.batches.estimate({ accountId: auth.account.id, apiKeyId: null, via: 'dashboard' }, body),
    );
  }

  @Get()
  @ApiOperation({
    operationId: 'listDashboardBatches',
    summary: "The account's batches, newest first, whichever way they were created; filtered by status, model, dates and text",
  })
  @ApiOkResponse({ type: BatchListResponseDto })
  async list(@CurrentSession() auth: AuthenticatedSession, @Query() q: DashboardBatchListQueryDto): Promise<BatchListResponseDto> {
    const filter = parseBatchFilter(q);
    return BatchListResponseDto.from(await this.batches.list(auth.account.id, parseLimit(q.limit), decodeCursor(q.cursor), filter));
  }

  @Get(':id')
  @ApiOperation({
    operationId: 'getDashboardBatch',
    summary: 'A batch with its counts, done flag and tasks; conditional and long polling as GET /v1/batches/{id}',
  })
  @ApiBatchPoll()
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async detail(
    @CurrentSession() auth: AuthenticatedSession,
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    await answerPoll(this.polling, req, res, { accountId: auth.account.id, batchId: id, holder: `session:${auth.session.id}` });
  }

  @Get(':id/events')
  @ApiOperation({
    operationId: 'streamDashboardBatchEvents',
    summary: 'Follow a batch as Server-Sent Events, as GET /v1/batches/{id}/events',
  })
  @ApiBatchEvents()
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async events(
    @CurrentSession() auth: AuthenticatedSession,
    @Param('id') id: string,
    @Req() req: Request,
    @Res() res: Response,
  ): Promise<void> {
    await streamEvents(this.eventStreams, req, res, { accountId: auth.account.id, batchId: id, holder: `session:${auth.session.id}` });
  }

  @Post(':id/cancel')
  @HttpCode(200)
  @ApiOperation({ operationId: 'cancelDashboardBatch', summary: 'Cancel a batch, as POST /v1/batches/{id}/cancel' })
  @ApiOkResponse({ type: BatchDto, description: 'The batch after the cancel' })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  @ApiConflictResponse({ description: 'batch_not_cancellable: the batch finished without a cancel', type: ErrorResponseDto })
  async cancel(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string): Promise<BatchDto> {
    return BatchDto.from(await this.batches.cancel(auth.account.id, id));
  }

  @Get(':id/tasks/:taskId/file')
  @ApiOperation({
    operationId: 'downloadDashboardTaskFile',
    summary: "A succeeded image's file, as an attachment: the web app's Download (its result URL may be on another origin)",
  })
  @ApiProduces('image/png', 'image/jpeg', 'image/webp')
  @ApiOkResponse({
    description: 'The image (Content-Disposition: attachment; filename="kiln-<batch id>-<index>.<ext>")',
    schema: { type: 'string', format: 'binary' },
  })
  @ApiNotFoundResponse({ description: 'not_found: no such succeeded image in a batch of this account', type: ErrorResponseDto })
  async file(
    @CurrentSession() auth: AuthenticatedSession,
    @Param('id') id: string,
    @Param('taskId') taskId: string,
    @Res() res: Response,
  ): Promise<void> {
    const file = await this.files.open(auth.account.id, id, taskId);
    res.setHeader('Content-Type', file.contentType);
    res.setHeader('Content-Disposition', `attachment; filename="${file.fileName}"`);
    res.setHeader('X-Content-Type-Options', 'nosniff');
    // A client gone mid-file ends the pipeline (and the storage read): nothing left to answer.
    await pipeline(file.body, res).catch(() => undefined);
  }

  @Get(':id/archive')
  @ApiOperation({
    operationId: 'downloadDashboardBatchArchive',
    summary: "A zip of the batch's images and manifest.json, as GET /v1/batches/{id}/archive",
  })
  @ApiProduces('application/zip')
  @ApiOkResponse({
    description: 'The zip (Content-Disposition: attachment; filename="kiln-<id>.zip")',
    schema: { type: 'string', format: 'binary' },
  })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async archive(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string, @Res() res: Response): Promise<void> {
    await sendArchive(this.archives, await this.archives.open(auth.account.id, id), res);
  }
}
