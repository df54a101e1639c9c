import { Body, Controller, Get, HttpCode, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import { BillingService } from '@app/billing';
import { decodeCursor, parseLimit } from '@app/database';
import { KeysService } from '@app/keys';
import { AccountDto, AccountResponseDto } from '../common/account.response.dto';
import { CreateKeyRequestDto } from '../common/key.request.dto';
import { CreatedKeyResponseDto, KeyDto } from '../common/key.response.dto';
import { AdminGuard } from './admin.guard';
import { AdminAccountListResponseDto } from './admin.response.dto';
import { CreateAccountRequestDto, CreditsRequestDto, ListQueryDto, UpdateAccountRequestDto } from './admin.request.dto';

/** Operator API: accounts, their credits and keys (docs/admin.md). Thin: every rule lives in the libs. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin/accounts')
export class AdminAccountsController {
  constructor(
    private readonly accounts: AccountsService,
    private readonly billing: BillingService,
    private readonly keys: KeysService,
  ) {}

  @Post()
  @ApiOperation({ operationId: 'createAdminAccount', summary: 'Create an account' })
  @ApiCreatedResponse({ type: AccountResponseDto })
  async createAccount(@Body() body: CreateAccountRequestDto): Promise<AccountResponseDto> {
    return { account: AccountDto.from(await this.accounts.create(body)) };
  }

  @Get()
  @ApiOperation({ operationId: 'listAdminAccounts', summary: 'List accounts, newest first' })
  @ApiOkResponse({ type: AdminAccountListResponseDto })
  async listAccounts(@Query() q: ListQueryDto) {
    const page = await this.accounts.list(parseLimit(q.limit), decodeCursor(q.cursor));
    return { accounts: page.accounts.map((a) => AccountDto.from(a)), nextCursor: page.nextCursor };
  }

  @Get(':id')
  @ApiOkResponse({ type: AccountResponseDto })
  @ApiOperation({ operationId: 'getAdminAccount', summary: 'An account by id' })
  async getAccount(@Param('id') id: string): Promise<AccountResponseDto> {
    return { account: AccountDto.from(await this.accounts.get(id)) };
  }

  @Patch(':id')
  @ApiOperation({ operationId: 'updateAdminAccount', summary: 'Change plan or status; disabling takes effect on the next request' })
  @ApiOkResponse({ type: AccountResponseDto })
  async updateAccount(@Param('id') id: string, @Body() body: UpdateAccountRequestDto): Promise<AccountResponseDto> {
    return { account: AccountDto.from(await this.accounts.update(id, body)) };
  }

  @Post(':id/credits')
  @HttpCode(200)
  @ApiOperation({ operationId: 'adjustAdminAccountCredits', summary: 'Grant (positive) or adjust credits; a ledger row records it' })
  @ApiOkResponse({ type: AccountResponseDto })
  async credits(@Param('id') id: string, @Body() body: CreditsRequestDto): Promise<AccountResponseDto> {
    await this.accounts.get(id);
    await this.billing.adjust(id, body.amount, body.amount > 0 ? 'grant' : 'adjustment', body.reason);
    return { account: AccountDto.from(await this.accounts.get(id)) };
  }

  @Post(':id/keys')
  @ApiOperation({ operationId: 'createAdminAccountKey', summary: 'Create an API key for an account; the secret is shown only here' })
  @ApiCreatedResponse({ type: CreatedKeyResponseDto })
  async createKey(@Param('id') id: string, @Body() body: CreateKeyRequestDto): Promise<CreatedKeyResponseDto> {
    await this.accounts.get(id);
    const { key, secret } = await this.keys.create(id, body);
    return { key: KeyDto.from(key, 0), secret };
  }
}
