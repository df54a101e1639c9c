import { Body, Controller, Delete, Get, Param, Patch, Post } from '@nestjs/common';
import { ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiResponse, ApiTags } from '@nestjs/swagger';
import { BillingService } from '@app/billing';
import { ApiKeyEntity } from '@app/database';
import { KeysService } from '@app/keys';
import { AuthenticatedSession } from '@app/sessions';
import { ErrorResponseDto } from '../common/error.response.dto';
import { UpdateKeyRequestDto } from '../common/key.request.dto';
import { CreatedKeyResponseDto, KeyDto, KeyResponseDto } from '../common/key.response.dto';
import { DashboardCreateKeyRequestDto } from './dto/dashboard.request.dto';
import { KeyListResponseDto } from './dto/dashboard.response.dto';
import { CurrentSession, SessionAuth } from './session.decorators';

/** The holder's API keys. Every rule (plan key count, ownership, revocation) is KeysService's. */
@ApiTags('Dashboard')
@SessionAuth()
@ApiResponse({ status: 400, description: 'invalid_request', type: ErrorResponseDto })
@Controller('dashboard/keys')
export class DashboardKeysController {
  constructor(
    private readonly keys: KeysService,
    private readonly billing: BillingService,
  ) {}

  @Get()
  @ApiOperation({ operationId: 'listDashboardKeys', summary: "The account's API keys, newest first, with today's usage" })
  @ApiOkResponse({ type: KeyListResponseDto })
  async list(@CurrentSession() auth: AuthenticatedSession): Promise<KeyListResponseDto> {
    const keys = await this.keys.list(auth.account.id);
    const used = await this.billing.creditsUsedTodayByKey(keys.map((k) => k.id));
    const spent = await this.billing.budgetSpentByKey(keys);
    return { keys: keys.map((k) => KeyDto.from(k, used.get(k.id) ?? 0, spent.get(k.id) ?? 0)) };
  }

  @Post()
  @ApiOperation({ operationId: 'createDashboardKey', summary: 'Create an API key; the secret is shown only in this response' })
  @ApiCreatedResponse({ type: CreatedKeyResponseDto })
  @ApiResponse({ status: 403, description: 'key_limit_exceeded (the free plan allows none)', type: ErrorResponseDto })
  async create(@CurrentSession() auth: AuthenticatedSession, @Body() body: DashboardCreateKeyRequestDto): Promise<CreatedKeyResponseDto> {
    const { key, secret } = await this.keys.create(auth.account.id, body);
    return { key: KeyDto.from(key, 0), secret };
  }

  @Patch(':id')
  @ApiOperation({
    operationId: 'updateDashboardKey',
    summary: 'Rename, set or clear (null) the budget, or change the scopes or models of a key',
  })
  @ApiOkResponse({ type: KeyResponseDto })
  @ApiResponse({ status: 404, description: 'not_found', type: ErrorResponseDto })
  async update(
    @CurrentSession() auth: AuthenticatedSession,
    @Param('id') id: string,
    @Body() body: UpdateKeyRequestDto,
  ): Promise<KeyResponseDto> {
    return { key: await this.withUsage(await this.keys.update(auth.account.id, id, body)) };
  }

  @Delete(':id')
  @ApiOperation({ operationId: 'revokeDashboardKey', summary: 'Revoke a key (idempotent); refused from the very next request' })
  @ApiOkResponse({ type: KeyResponseDto })
  @ApiResponse({ status: 404, description: 'not_found', type: ErrorResponseDto })
  async revoke(@CurrentSession() auth: AuthenticatedSession, @Param('id') id: string): Promise<KeyResponseDto> {
    return { key: await this.withUsage(await this.keys.revoke(auth.account.id, id)) };
  }

  private async withUsage(key: ApiKeyEntity): Promise<KeyDto> {
    const spent = await this.billing.budgetSpentByKey([key]);
    return KeyDto.from(key, await this.billing.creditsUsedToday(key.id), spent.get(key.id) ?? 0);
  }
}
