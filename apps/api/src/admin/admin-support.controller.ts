import { Body, Controller, Delete, Get, HttpCode, Param, Post, Put, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiNotFoundResponse, ApiOkResponse, ApiOperation, ApiParam, ApiTags } from '@nestjs/swagger';
import { BatchesService, ContentPolicyService } from '@app/batches';
import { BillingService } from '@app/billing';
import { ApiKeyEntity } from '@app/database';
import { KeysService } from '@app/keys';
import { ErrorResponseDto } from '../common/error.response.dto';
import { KeyDto } from '../common/key.response.dto';
import { BatchDetailResponseDto } from '../batches/dto/batch.response.dto';
import { AdminGuard } from './admin.guard';
import {
  AdminBatchResponseDto,
  AdminKeyDto,
  AdminKeyListResponseDto,
  AdminKeyResponseDto,
  ContentPolicyDto,
  ContentPolicyRequestDto,
} from './admin-support.dto';

/** Operator API for support: any account's batch, keys by id or hint, the content blocklist. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin')
export class AdminSupportController {
  constructor(
    private readonly batches: BatchesService,
    private readonly keys: KeysService,
    private readonly billing: BillingService,
    private readonly contentPolicy: ContentPolicyService,
  ) {}

  @Get('batches/:id')
  @ApiOperation({ operationId: 'getAdminBatch', summary: "Any account's batch by id, as its owner polls it, with the owner's account id" })
  @ApiOkResponse({ type: AdminBatchResponseDto })
  @ApiNotFoundResponse({ description: 'not_found', type: ErrorResponseDto })
  async batch(@Param('id') id: string): Promise<AdminBatchResponseDto> {
    const found = await this.batches.detailForOperator(id);
    const detail = BatchDetailResponseDto.from(found);
    const tasks = detail.tasks.map((t) => ({
      ...t,
      upstreamRequestId: found.upstreamRequestIds.get(t.id) ?? null,
      route: found.routes.get(t.id) ?? null,
    }));
    return { accountId: found.accountId, ...detail, tasks };
  }

  // One path parameter name for GET and DELETE /keys/{id}: the same path to a client (and
  // to an OpenAPI linter); GET also takes the hint in its place.
  @Get('keys/:id')
  @ApiOperation({
    operationId: 'findAdminKeys',
    summary: 'API keys by id, or by the hint their holder sees (kiln_live_abcd...wxyz) in place of the id; any account',
  })
  @ApiParam({ name: 'id', description: 'A key id, or a key hint such as kiln_live_abcd...wxyz' })
  @ApiOkResponse({ type: AdminKeyListResponseDto })
  async findKeys(@Param('id') idOrHint: string): Promise<AdminKeyListResponseDto> {
    const keys = await this.keys.findByIdOrHint(idOrHint);
    return { keys: await Promise.all(keys.map((k) => this.keyDto(k))) };
  }

  @Post('keys/:id/revoke')
  @HttpCode(200)
  @ApiOperation({ operationId: 'revokeAdminKey', summary: "Revoke any account's key; refused on its next request on every replica" })
  @ApiOkResponse({ type: AdminKeyResponseDto })
  @ApiNotFoundResponse({ description: 'not_found', type: ErrorResponseDto })
  async revokeKey(@Param('id') id: string): Promise<AdminKeyResponseDto> {
    return { key: await this.keyDto(await this.keys.revokeById(id)) };
  }

  @Delete('keys/:id')
  @ApiOperation({ operationId: 'deleteAdminKey', summary: 'Same as POST /v1/admin/keys/{id}/revoke (keys are revoked, never erased)' })
  @ApiOkResponse({ type: AdminKeyResponseDto })
  @ApiNotFoundResponse({ description: 'not_found', type: ErrorResponseDto })
  async deleteKey(@Param('id') id: string): Promise<AdminKeyResponseDto> {
    return this.revokeKey(id);
  }

  @Get('content-policy')
  @ApiOperation({ operationId: 'getAdminContentPolicy', summary: 'The blocked terms batch creation refuses prompts for' })
  @ApiOkResponse({ type: ContentPolicyDto })
  async getContentPolicy(): Promise<ContentPolicyDto> {
    return { terms: await this.contentPolicy.terms() };
  }

  @Put('content-policy')
  @ApiOperation({
    operationId: 'updateAdminContentPolicy',
    summary: 'Replace the blocked terms (normalised: NFKC, lower case, single spaces; duplicates dropped); every api applies it within 5 s',
  })
  @ApiOkResponse({ type: ContentPolicyDto })
  async putContentPolicy(@Body() body: ContentPolicyRequestDto): Promise<ContentPolicyDto> {
    return { terms: await this.contentPolicy.replace(body.terms) };
  }

  private async keyDto(k: ApiKeyEntity): Promise<AdminKeyDto> {
    const spent = await this.billing.budgetSpentByKey([k]);
    return { ...KeyDto.from(k, await this.billing.creditsUsedToday(k.id), spent.get(k.id) ?? 0), accountId: k.accountId };
  }
}
