import { Body, Controller, Get, HttpCode, Param, Patch, Post, Query, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiCreatedResponse, ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { AccountsService } from '@app/accounts';
import { BillingService } from '@app/billing';
import { CatalogService } from '@app/catalog';
import { TaskDispatchService } from '@app/tasks';
import { decodeCursor, parseLimit } from '@app/database';
import { KeysService } from '@app/keys';
import { AccountDto, AccountResponseDto } from '../common/account.response.dto';
import { CreateKeyRequestDto } from '../common/key.request.dto';
import { CreatedKeyResponseDto, KeyDto } from '../common/key.response.dto';
import { AdminGuard } from './admin.guard';
import {
  CreateAccountRequestDto,
  CreditsRequestDto,
  ListQueryDto,
  UpdateAccountRequestDto,
  UpdateModelRequestDto,
  UpdatePlanRequestDto,
} from './admin.request.dto';

/** Operator API (decisions.md 10). Thin: every rule lives in the libs. */
@ApiTags('Admin')
@ApiBearerAuth('adminToken')
@UseGuards(AdminGuard)
@Controller('admin')
export class AdminController {
  constructor(
    private readonly accounts: AccountsService,
    private readonly billing: BillingService,
    private readonly keys: KeysService,
    private readonly catalog: CatalogService,
    private readonly dispatch: TaskDispatchService,
  ) {}

  @Post('accounts')
  @ApiOperation({ summary: 'Create an account' })
  @ApiCreatedResponse({ type: AccountResponseDto })
  async createAccount(@Body() body: CreateAccountRequestDto): Promise<AccountResponseDto> {
    return { account: AccountDto.from(await this.accounts.create(body)) };
  }

  @Get('accounts')
  @ApiOperation({ summary: 'List accounts, newest first' })
  async listAccounts(@Query() q: ListQueryDto) {
    const page = await this.accounts.list(parseLimit(q.limit), decodeCursor(q.cursor));
    return { accounts: page.accounts.map(AccountDto.from), nextCursor: page.nextCursor };
  }

  @Get('accounts/:id')
  @ApiOkResponse({ type: AccountResponseDto })
  async getAccount(@Param('id') id: string): Promise<AccountResponseDto> {
    return { account: AccountDto.from(await this.accounts.get(id)) };
  }

  @Patch('accounts/:id')
  @ApiOperation({ summary: 'Change plan or status; disabling takes effect on the next request' })
  @ApiOkResponse({ type: AccountResponseDto })
  async updateAccount(@Param('id') id: string, @Body() body: UpdateAccountRequestDto): Promise<AccountResponseDto> {
    return { account: AccountDto.from(await this.accounts.update(id, body)) };
  }

  @Post('accounts/:id/credits')
  @HttpCode(200)
  @ApiOperation({ summary: 'Grant (positive) or adjust credits; a ledger row records it' })
  @ApiOkResponse({ type: AccountResponseDto })
  async credits(@Param('id') id: string, @Body() body: CreditsRequestDto): Promise<AccountResponseDto> {
    await this.accounts.get(id);
    await this.billing.adjust(id, body.amount, body.amount > 0 ? 'grant' : 'adjustment', body.reason);
    return { account: AccountDto.from(await this.accounts.get(id)) };
  }

  @Post('accounts/:id/keys')
  @ApiOperation({ summary: 'Create an API key for an account; the secret is shown only here' })
  @ApiCreatedResponse({ type: CreatedKeyResponseDto })
  async createKey(@Param('id') id: string, @Body() body: CreateKeyRequestDto): Promise<CreatedKeyResponseDto> {
    await this.accounts.get(id);
    const { key, secret } = await this.keys.create(id, body);
    return { key: KeyDto.from(key, 0), secret };
  }

  @Get('models')
  @ApiOperation({ summary: 'Every model, enabled or not, with its provider routing' })
  async listModels() {
    return { models: await this.catalog.listAll() };
  }

  @Patch('models/:key')
  @ApiOperation({ summary: 'Edit prices, sizes, caps, enabled or provider routing; applies to later batches' })
  async updateModel(@Param('key') key: string, @Body() body: UpdateModelRequestDto) {
    return { model: await this.catalog.update(key, body) };
  }

  @Get('plans')
  async listPlans() {
    return { plans: await this.accounts.listPlans() };
  }

  @Patch('plans/:key')
  @ApiOperation({ summary: 'Edit a plan (limits, rate limit per key per minute)' })
  async updatePlan(@Param('key') key: string, @Body() body: UpdatePlanRequestDto) {
    return { plan: await this.accounts.updatePlan(key, body) };
  }

  @Get('queues')
  @ApiOperation({ summary: 'Waiting, active, delayed and failed jobs per queue, and the tasks pending in PostgreSQL' })
  async queues() {
    return { queues: [await this.dispatch.queueStats()] };
  }
}
