import { Body, Controller, Get, Param, Post, Query } from '@nestjs/common';
import { ApiCreatedResponse, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { BatchesService } from '@app/batches';
import type { AuthenticatedSession } from '@app/dashboard';
import { decodeCursor, parseLimit } from '@app/database';
import { BatchListQueryDto } from '../batches/dto/batch-list.query.dto';
import { BatchDetailResponseDto, BatchListResponseDto, CreatedBatchResponseDto } from '../batches/dto/batch.response.dto';
import { CreateBatchRequestDto } from '../batches/dto/create-batch.request.dto';
import { ErrorResponseDto } from '../common/error.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

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
  constructor(private readonly batches: BatchesService) {}

  @Post()
  @ApiOperation({ operationId: 'createDashboardBatch', summary: 'Create a batch from the dashboard (createdViaApi: false); charged up front like POST /v1/batches' })
  @ApiCreatedResponse({ type: CreatedBatchResponseDto })
  @ApiResponse({ status: 402, description: 'insufficient_credits', type: ErrorResponseDto })
  @ApiResponse({ status: 403, description: 'batch_limit_exceeded, concurrent_limit_exceeded, account_disabled', type: ErrorResponseDto })
  async create(@CurrentSession() auth: AuthenticatedSession, @Body() body: CreateBatchRequestDto): Promise<CreatedBatchResponseDto> {
    const batch = await this.batches.create({ accountId: auth.account.id, apiKeyId: null, via: 'dashboard' }, body);
    return CreatedBatchResponseDto.from(batch);
  }

  @Get()
  @ApiOperation({ operationId: 'listDashboardBatches', summary: "The account's batches, newest first, whichever way they were created" })
  @ApiOkResponse({ type: BatchListResponseDto })
  async list(@CurrentSession() auth: AuthenticatedSession, @Query() q: BatchListQueryDto): Promise<BatchListResponseDto> {
    return BatchListResponseDto.from(await this.batches.list(auth.account.id, parseLimit(q.limit), decodeCursor(q.cursor)));
  }

  @Get(':id')
  @ApiOperation({ operationId: 'getDashboardBatch', summary: 'A batch with its counts, done flag and tasks' })
  @ApiOkResponse({ type: BatchDetailResponseDto })
  @ApiNotFoundResponse({ description: 'not_found: no such batch on this account', type: ErrorResponseDto })
  async detail(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string): Promise<BatchDetailResponseDto> {
    return BatchDetailResponseDto.from(await this.batches.detail(auth.account.id, id));
  }
}
